package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// scaleStep is one point of the scale curve: this many pods over this many workloads.
type scaleStep struct{ pods, workloads int }

// memory measures the scale curve: at each step it fills the cluster up to the step's
// Deployments (a ReplicaSet each) and pods, shaped as a kubelet leaves them (status,
// conditions, container statuses, managedFields of two managers), restarts the replica and
// reports how long its informers take to sync (until it is ready), its resident memory
// once settled, and the p99 of a guarded review straight at it. A line fitted through the
// steps gives the bytes each cached pod costs beyond a fixed base.
func (b *bench) memory(ctx context.Context, o options) error {
	const namespaces = 20
	for i := range namespaces {
		if err := namespace(ctx, b.c, fmt.Sprintf("memory-%02d", i), nil); err != nil {
			return err
		}
	}
	steps := []scaleStep{{1000, 200}, {10000, 2000}, {25000, 5000}}
	if o.scale50k {
		steps = append(steps, scaleStep{50000, 10000})
	}
	review, hc, url, err := b.tenant(ctx)
	if err != nil {
		return err
	}
	var xs, ys, hs []float64
	have := 0 // workloads created so far, each with pods/workloads pods
	for _, st := range steps {
		perWorkload := st.pods / st.workloads
		start := time.Now()
		err := parallel(ctx, 4*runtime.NumCPU(), st.workloads-have, func(ctx context.Context, k int) error {
			return b.scaleWorkload(ctx, fmt.Sprintf("memory-%02d", (have+k)%namespaces), have+k, perWorkload)
		})
		if err != nil {
			return err
		}
		have = st.workloads
		fmt.Fprintf(os.Stderr, "bench: %d Deployments, ReplicaSets and %d pods in the cluster (%s)\n",
			st.workloads, st.pods, time.Since(start).Round(time.Second))
		// A fresh replica: its memory is its caches, not what earlier measurements left.
		began := time.Now()
		if err := b.restart(ctx); err != nil {
			return err
		}
		synced := time.Since(began)
		// The watches deliver within seconds; give the replica time to settle and collect garbage.
		time.Sleep(20 * time.Second)
		mib, err := rss(b.cmd.Process.Pid)
		if err != nil {
			return err
		}
		lat, errs, _ := load(ctx, 5*time.Second, 1, nil, func(ctx context.Context) error { return expectAllowed(post(ctx, hc, url, review)) })
		if errs > 0 {
			return fmt.Errorf("%d reviews failed at %d pods", errs, st.pods)
		}
		heap, err := b.heapInUse()
		if err != nil {
			return err
		}
		prefix := fmt.Sprintf("scale-%dpods", st.pods)
		report(prefix+"-workloads", float64(st.workloads), "workloads")
		report(prefix+"-sync", synced.Seconds(), "s")
		report(prefix+"-rss", mib, "MiB")
		report(prefix+"-heap-inuse", heap, "MiB")
		report(prefix+"-review-p99", percentile(sorted(lat), 0.99), "ms")
		xs, ys, hs = append(xs, float64(st.pods)), append(ys, mib), append(hs, heap)
		if err := b.saveHeapProfile(fmt.Sprintf("_output/bench/heap-%dpods.pb.gz", st.pods)); err != nil {
			return err
		}
	}
	slope, base := fit(xs, ys)
	report("scale-bytes-per-pod", slope*1024*1024, "bytes")
	report("scale-base-rss", base, "MiB")
	report("scale-150000pods-projected-rss", base+slope*150000, "MiB")
	// The live heap, against the resident memory: what the caches hold, and what the
	// runtime keeps from the informers' initial lists and its collection target.
	hslope, hbase := fit(xs, hs)
	report("scale-heap-bytes-per-pod", hslope*1024*1024, "bytes")
	report("scale-base-heap", hbase, "MiB")
	return nil
}

// scaleWorkload creates Deployment i in ns, its ReplicaSet, and n pods as a kubelet
// reports them.
func (b *bench) scaleWorkload(ctx context.Context, ns string, i, n int) error {
	d := utiltesting.MakeDeployment(ns, fmt.Sprintf("app-%05d", i)).Replicas(int32(n)).
		Container("sidecar", "--listen=:8080", "--upstream=http://127.0.0.1:9090", "--log-level=info").Obj()
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west-1"}}
	if err := b.c.Create(ctx, d); err != nil {
		return err
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name + "-5d8f7b9c4",
		Labels:          map[string]string{"app": d.Name, appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7b9c4"},
		Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: *d.Spec.Template.DeepCopy()}}
	rs.Spec.Template.Labels = map[string]string{"app": d.Name, appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7b9c4"}
	if err := b.c.Create(ctx, rs); err != nil {
		return err
	}
	for j := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%05d", rs.Name, j),
			Labels:          rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: *rs.Spec.Template.Spec.DeepCopy()}
		p.Spec.NodeName = fmt.Sprintf("node-%03d", (i+j)%200)
		if err := b.c.Create(ctx, p); err != nil {
			return err
		}
		p.Status = runningStatus(p, i*1000+j)
		if err := b.c.Status().Update(ctx, p, client.FieldOwner("kubelet")); err != nil {
			return err
		}
	}
	return nil
}

// runningStatus is the status a kubelet reports for a running pod.
func runningStatus(p *corev1.Pod, n int) corev1.PodStatus {
	started := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	ip := fmt.Sprintf("10.%d.%d.%d", 64+n/65536%64, n/256%256, n%256)
	host := fmt.Sprintf("192.168.%d.%d", n/256%200, n%256)
	st := corev1.PodStatus{Phase: corev1.PodRunning, HostIP: host, HostIPs: []corev1.HostIP{{IP: host}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &started, QOSClass: corev1.PodQOSBestEffort}
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: started})
	}
	for k, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			ImageID:     c.Image + "@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
			ContainerID: fmt.Sprintf("containerd://%064x", n*8+k), Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}})
	}
	return st
}

// fit is the least-squares line y = slope·x + intercept through the points.
func fit(xs, ys []float64) (slope, intercept float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	if d := n*sxx - sx*sx; d != 0 {
		slope = (n*sxy - sx*sy) / d
	}
	return slope, (sy - slope*sx) / n
}

// parallel runs do(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

func rss(pid int) (float64, error) { return procStatus(pid, "VmRSS") }

// procStatus reads a kB field of /proc/<pid>/status, in MiB.
func procStatus(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// heapInUse reads the replica's go_memstats_heap_inuse_bytes, in MiB.
func (b *bench) heapInUse() (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", b.proc.MetricsPort))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f / (1 << 20), err
		}
	}
	return 0, fmt.Errorf("no go_memstats_heap_inuse_bytes in the replica's metrics")
}

// saveHeapProfile keeps the replica's heap profile (go tool pprof -top -sample_index=inuse_space
// shows what holds the memory).
func (b *bench) saveHeapProfile(path string) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", b.pprofPort))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	fmt.Fprintf(os.Stderr, "bench: heap profile in %s\n", path)
	return err
}
