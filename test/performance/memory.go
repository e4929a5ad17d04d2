package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// scalePoint is one point of the scale curve: this many pods over this many workloads,
// guardedPct of the workloads (and so of the pods) selected by a policy.
type scalePoint struct{ pods, workloads, guardedPct int }

// guardedLabel marks the Deployments the memory measurement's policy selects.
const guardedLabel = "bench.holdfast.dev/guarded"

// memory measures the scale curve, guarded and unguarded pods apart: at each point it
// fills the cluster up to the point's Deployments (a ReplicaSet each) and pods, shaped as
// a kubelet leaves them (status, conditions, container statuses, managedFields of two
// managers), labels the point's share of the Deployments for a RolloutPolicy, restarts the
// replica with the chart's default GOMEMLIMIT and reports how long it takes to be ready
// (its informers and pod watches synced), its peak resident memory (VmHWM: the initial
// sync, when it would be OOM-killed), its settled resident memory, its live heap after a
// forced collection, the share of its CPU the collector took, and the p99 of a guarded
// review straight at it. A plane fitted through the points gives the heap each guarded and
// each unguarded pod costs, its share of its workload's objects included.
func (b *bench) memory(ctx context.Context, o options) error {
	const namespaces = 20
	for i := range namespaces {
		if err := namespace(ctx, b.c, fmt.Sprintf("memory-%02d", i), map[string]string{"bench.holdfast.dev/memory": "true"}); err != nil {
			return err
		}
	}
	p := utiltesting.MakeRolloutPolicy("memory").Kinds(v1alpha1.KindDeployment).
		NamespaceSelector(map[string]string{"bench.holdfast.dev/memory": "true"}).Obj()
	p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{guardedLabel: "true"}}
	// A journal is kept for the policies' longest look-back after its workload leaves the
	// selection (journal.Retention; settle's stallAfter here, and the tenant's, below). One
	// minute, so that each point's cluster holds the journals of its guarded workloads
	// alone, whatever the points before it guarded: the point measures its share guarded,
	// not the bench's history.
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: time.Minute}}
	// The bench labels and unlabels workloads whose rollouts its cluster never runs (no
	// controller acts on them): with holdfast's webhooks installed (make bench runs the
	// comparison first) the selection rule would refuse that, rightly. It is the bench's
	// setup, not what it measures: its requests are exempt.
	me := &authenticationv1.SelfSubjectReview{}
	if err := b.c.Create(ctx, me); err != nil {
		return err
	}
	p.Spec.Exemptions.Users = []string{me.Status.UserInfo.Username}
	if err := b.c.Create(ctx, p); err != nil {
		return err
	}
	points := []scalePoint{{1000, 200, 10}, {10000, 2000, 10}, {25000, 5000, 0}, {25000, 5000, 10}, {25000, 5000, 50}, {50000, 10000, 10}}
	if o.points != "" {
		points = nil
		for _, s := range strings.Split(o.points, ",") {
			var pt scalePoint
			if _, err := fmt.Sscanf(s, "%d:%d:%d", &pt.pods, &pt.workloads, &pt.guardedPct); err != nil || pt.workloads <= 0 {
				return fmt.Errorf("-points: %q is not pods:workloads:guarded%%", s)
			}
			points = append(points, pt)
		}
	}
	if o.scale100k {
		points = append(points, scalePoint{100000, 20000, 5})
	}
	review, hc, url, err := b.tenant(ctx)
	if err != nil {
		return err
	}
	// Journals are kept for the longest look-back of every policy: the tenant's 10 minutes
	// are one here too, and back after.
	restore, err := b.lookBack(ctx, "serve", time.Minute)
	if err != nil {
		return err
	}
	defer restore()
	b.memLimit = chartMemoryLimit
	defer func() { b.memLimit = "" }()
	var guardedPods, unguardedPods, heaps []float64
	have, guarded := 0, map[int]bool{} // workloads created so far, each with pods/workloads pods; those labelled
	for _, pt := range points {
		perWorkload := pt.pods / pt.workloads
		start := time.Now()
		err := parallel(ctx, 4*runtime.NumCPU(), pt.workloads-have, func(ctx context.Context, k int) error {
			return b.scaleWorkload(ctx, fmt.Sprintf("memory-%02d", (have+k)%namespaces), have+k, perWorkload)
		})
		if err != nil {
			return err
		}
		have = pt.workloads
		created := time.Since(start)
		// Workload i is guarded when i mod 100 < guardedPct: spread over the namespaces.
		err = parallel(ctx, 4*runtime.NumCPU(), pt.workloads, func(ctx context.Context, i int) error {
			want := i%100 < pt.guardedPct
			if guarded[i] == want {
				return nil
			}
			return b.guard(ctx, fmt.Sprintf("memory-%02d", i%namespaces), i, want)
		})
		if err != nil {
			return err
		}
		n := 0
		for i := range pt.workloads {
			guarded[i] = i%100 < pt.guardedPct
			if guarded[i] {
				n++
			}
		}
		fmt.Fprintf(os.Stderr, "bench: %d Deployments (%d guarded), ReplicaSets and %d pods in the cluster (%s: created in %s)\n",
			pt.workloads, n, pt.pods, time.Since(start).Round(time.Second), created.Round(time.Second))
		report(fmt.Sprintf("scale-%dpods-%dpct-relabel-retries", pt.pods, pt.guardedPct), float64(b.relabelRetries.Swap(0)), "requests")
		// The journals of the workloads no longer guarded retire.
		if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			journals, err := b.memoryJournals(ctx)
			return journals <= n, err
		}); err != nil {
			return fmt.Errorf("the journals of the workloads no longer guarded were not retired: %w", err)
		}
		// A fresh replica: its memory is its caches, not what earlier measurements left.
		began := time.Now()
		if err := b.restart(ctx); err != nil {
			return err
		}
		synced := time.Since(began)
		// The watches deliver within seconds; give the replica time to settle.
		time.Sleep(20 * time.Second)
		peak, err := procStatus(b.cmd.Process.Pid, "VmHWM")
		if err != nil {
			return err
		}
		mib, err := rss(b.cmd.Process.Pid)
		if err != nil {
			return err
		}
		lat, errs, _ := load(ctx, 5*time.Second, 1, nil, func(ctx context.Context) error { return expectAllowed(post(ctx, hc, url, review)) })
		if errs > 0 {
			return fmt.Errorf("%d reviews failed at %d pods", errs, pt.pods)
		}
		prefix := fmt.Sprintf("scale-%dpods-%dpct", pt.pods, pt.guardedPct)
		if err := b.saveHeapProfile(fmt.Sprintf("_output/bench/heap-%s.pb.gz", prefix)); err != nil { // collects first
			return err
		}
		m, err := b.metrics("go_memstats_heap_alloc_bytes", "go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_user_cpu_seconds_total")
		if err != nil {
			return err
		}
		heap := m[0] / (1 << 20)
		queued, err := b.metricSum("workqueue_depth")
		if err != nil {
			return err
		}
		journals, _, err := b.journalBytes(ctx)
		if err != nil {
			return err
		}
		guardedN := float64(pt.pods) * float64(n) / float64(pt.workloads)
		report(prefix+"-guarded-pods", guardedN, "pods")
		report(prefix+"-journals", float64(journals), "journals")
		report(prefix+"-sync", synced.Seconds(), "s")
		report(prefix+"-peak-rss", peak, "MiB")
		report(prefix+"-rss", mib, "MiB")
		report(prefix+"-live-heap", heap, "MiB")
		if m[1]+m[2] > 0 {
			report(prefix+"-gc-cpu-share", 100*m[1]/(m[1]+m[2]), "%")
		}
		report(prefix+"-review-p99", percentile(sorted(lat), 0.99), "ms")
		report(prefix+"-queued", queued, "requests")
		guardedPods, unguardedPods, heaps = append(guardedPods, guardedN), append(unguardedPods, float64(pt.pods)-guardedN), append(heaps, heap)
	}
	perGuarded, perUnguarded, base, ok := fitPlane(guardedPods, unguardedPods, heaps)
	if !ok {
		// Fewer than three points, or points on one line (guarded and unguarded pods in
		// one proportion at every point), fit no plane: no figure beats a made-up one.
		fmt.Fprintln(os.Stderr, "bench: the points do not fit a plane (they need three not on one line): no per-pod figures")
		return nil
	}
	report("scale-bytes-per-guarded-pod", perGuarded*(1<<20), "bytes")
	report("scale-bytes-per-unguarded-pod", perUnguarded*(1<<20), "bytes")
	report("scale-base-heap", base, "MiB")
	return nil
}

// memoryJournals counts the journals of the memory measurement's workloads.
func (b *bench) memoryJournals(ctx context.Context) (int, error) {
	cms, err := b.listJournals(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range cms.Items {
		if j, err := journal.Decode(&cms.Items[i]); err == nil && strings.HasPrefix(j.Namespace, "memory-") {
			n++
		}
	}
	return n, nil
}

// lookBack sets the look-backs of RolloutPolicy name (revertWindow, settle's stallAfter) to
// d, and returns what sets them back.
func (b *bench) lookBack(ctx context.Context, name string, d time.Duration) (func(), error) {
	var rules *v1alpha1.RolloutRules
	err := b.editRules(ctx, name, func(r *v1alpha1.RolloutRules) {
		if rules == nil {
			rules = r.DeepCopy()
		}
		r.RevertWindow = &metav1.Duration{Duration: d}
		if r.Settle != nil {
			r.Settle.StallAfter = &metav1.Duration{Duration: d}
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = b.editRules(context.Background(), name, func(r *v1alpha1.RolloutRules) { *r = *rules }) }, nil
}

// editRules edits the rules of RolloutPolicy name, read again on a conflict: holdfast
// writes the policy's status meanwhile.
func (b *bench) editRules(ctx context.Context, name string, edit func(*v1alpha1.RolloutRules)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.RolloutPolicy{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			return err
		}
		edit(&p.Spec.Rules)
		return b.c.Update(ctx, p)
	})
}

// chartMemoryLimit is the chart's default memory limit, which its GOMEMLIMIT follows.
const chartMemoryLimit = "268435456" // 256Mi

// guard labels Deployment i in ns for the memory policy, or takes the label off.
func (b *bench) guard(ctx context.Context, ns string, i int, guarded bool) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%05d", i)}}
	value := "null"
	if guarded {
		value = `"true"`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, guardedLabel, value)
	// A relabel into the selection reads the workload's history from the API server (no
	// watch holds it yet); when the API server is too slow for the request's deadline,
	// holdfast answers "retry", and the bench retries as a user would, counting it.
	return retry.OnError(wait.Backoff{Duration: time.Second, Factor: 2, Steps: 5}, func(err error) bool {
		var status apierrors.APIStatus
		if errors.As(err, &status) && slices.Contains([]int32{http.StatusInternalServerError, http.StatusTooManyRequests, http.StatusGatewayTimeout}, status.Status().Code) {
			b.relabelRetries.Add(1)
			return true
		}
		return false
	}, func() error {
		return b.c.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch)))
	})
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

// fitPlane is the least-squares plane z = a·x + b·y + c through the points.
func fitPlane(xs, ys, zs []float64) (a, b, c float64, ok bool) {
	// The normal equations, solved by Cramer's rule.
	var n, sx, sy, sz, sxx, syy, sxy, sxz, syz float64
	for i := range xs {
		x, y, z := xs[i], ys[i], zs[i]
		n, sx, sy, sz = n+1, sx+x, sy+y, sz+z
		sxx, syy, sxy, sxz, syz = sxx+x*x, syy+y*y, sxy+x*y, sxz+x*z, syz+y*z
	}
	det := func(m [3][3]float64) float64 {
		return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	}
	m := [3][3]float64{{sxx, sxy, sx}, {sxy, syy, sy}, {sx, sy, n}}
	r := [3]float64{sxz, syz, sz}
	d := det(m)
	if len(xs) < 3 || math.Abs(d) <= 1e-9*math.Abs(sxx*syy*n) {
		return 0, 0, 0, false
	}
	var out [3]float64
	for k := range 3 {
		mk := m
		for row := range 3 {
			mk[row][k] = r[row]
		}
		out[k] = det(mk) / d
	}
	return out[0], out[1], out[2], true
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

// metricSum is the sum of a metric's series over all their labels: requests waiting in
// every controller's queue (workqueue_depth), say.
func (b *bench) metricSum(name string) (float64, error) {
	var sum float64
	err := b.scrape(func(line string) (err error) {
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				var f float64
				f, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
				sum += f
			}
		}
		return err
	})
	return sum, err
}

// metrics reads the replica's metrics names (without labels), in order.
func (b *bench) metrics(names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	found := 0
	err := b.scrape(func(line string) error {
		for i, name := range names {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return err
				}
				out[i] = f
				found++
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found != len(names) {
		return nil, fmt.Errorf("the replica's metrics lack some of %v", names)
	}
	return out, nil
}

// scrape reads the replica's metrics, handing each line to f until it returns an error.
func (b *bench) scrape(f func(line string) error) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", b.proc.MetricsPort))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if err := f(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
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
