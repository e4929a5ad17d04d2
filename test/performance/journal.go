package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// journalLabel marks the namespaces of the journal measurement.
const journalLabel = "bench.holdfast.dev/journal"

// journals measures the revision journals at management-cluster scale: o.journals guarded
// Deployments (about 1,600 tenants of three control-plane Deployments at 5,000), rolled
// out by kube's own Deployment and ReplicaSet controllers (kube-controller-manager from
// the test bed, against the bench's API server; no replicas, so no pods). It reports how
// long the leader takes to journal them all, the journals' total size as etcd stores them,
// the leader's memory with them cached, how long a restarted leader takes to be ready,
// and, when every Deployment changes its template at once, the journal writes per second
// the leader makes (counted by the API server) until every journal holds the new revision.
// It ends with the Deployments, their ReplicaSets and the policy deleted and
// kube-controller-manager stopped, so that the measurements after it see none of them.
func (b *bench) journals(ctx context.Context, o options) error {
	if err := b.install(); err != nil {
		return err
	}
	kcm, err := b.startControllerManager()
	if err != nil {
		return err
	}
	defer func() { _ = kcm.Process.Kill(); _ = kcm.Wait() }()

	const namespaces = 50
	nss := make([]string, namespaces)
	for i := range nss {
		nss[i] = fmt.Sprintf("journal-%02d", i)
		if err := namespace(ctx, b.c, nss[i], map[string]string{journalLabel: "true"}); err != nil {
			return err
		}
	}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "journal"}, Spec: v1alpha1.RolloutPolicySpec{Mode: v1alpha1.ModeEnforce,
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{journalLabel: "true"}}},
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}}}
	if err := b.c.Create(ctx, p); err != nil {
		return err
	}
	defer func() { _ = b.c.Delete(context.Background(), p) }()
	defer b.deleteJournalWorkloads(nss)

	began := time.Now()
	names := make([]client.ObjectKey, o.journals)
	err = parallel(ctx, 4*runtime.NumCPU(), o.journals, func(ctx context.Context, i int) error {
		d := journalDeployment(nss[i%namespaces], fmt.Sprintf("tenant-%04d-%d", i/3, i%3))
		names[i] = client.ObjectKeyFromObject(d)
		return b.c.Create(ctx, d)
	})
	if err != nil {
		return err
	}
	created := time.Since(began)
	if err := b.waitJournals(ctx, o.journals, 1); err != nil {
		return err
	}
	journaled := time.Since(began)
	fmt.Fprintf(os.Stderr, "bench: %d Deployments created in %s, all journaled after %s\n", o.journals, created.Round(time.Second), journaled.Round(time.Second))
	report("journal-workloads", float64(o.journals), "workloads")
	report("journal-first-all-written", journaled.Seconds(), "s")

	count, size, err := b.journalBytes(ctx)
	if err != nil {
		return err
	}
	report("journal-count", float64(count), "journals")
	report("journal-etcd-bytes", float64(size)/(1<<20), "MiB")
	report("journal-etcd-bytes-per-journal", float64(size)/float64(max(count, 1)), "bytes")
	if err := b.leaderMemory("journal-leader"); err != nil {
		return err
	}

	// A new leader: this replica restarts (it runs without an election, so it leads at
	// once) and is ready once its caches, the journals among them, have synced.
	restarted := time.Now()
	if err := b.restart(ctx); err != nil {
		return err
	}
	report("journal-new-leader-ready", time.Since(restarted).Seconds(), "s")
	if err := b.leaderMemory("journal-new-leader"); err != nil {
		return err
	}

	// Every Deployment changes its template at once: kube makes a ReplicaSet each and the
	// leader records it.
	writes := func() (float64, error) {
		post, err := b.apiserverMetric(ctx, "apiserver_request_total{", `resource="configmaps"`, `verb="POST"`, `code="201"`)
		if err != nil {
			return 0, err
		}
		put, err := b.apiserverMetric(ctx, "apiserver_request_total{", `resource="configmaps"`, `verb="PUT"`, `code="200"`)
		return post + put, err
	}
	conflicts := func() (float64, error) {
		return b.apiserverMetric(ctx, "apiserver_request_total{", `resource="configmaps"`, `code="409"`)
	}
	writesBefore, err := writes()
	if err != nil {
		return err
	}
	conflictsBefore, err := conflicts()
	if err != nil {
		return err
	}
	var (
		mu        sync.Mutex
		perSecond []float64
	)
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		last := writesBefore
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-sampling.Done():
				return
			case <-tick.C:
			}
			n, err := writes()
			if err != nil {
				continue
			}
			mu.Lock()
			perSecond = append(perSecond, n-last)
			mu.Unlock()
			last = n
		}
	}()
	changed := time.Now()
	err = parallel(ctx, 4*runtime.NumCPU(), o.journals, func(ctx context.Context, i int) error {
		d := &appsv1.Deployment{}
		if err := b.c.Get(ctx, names[i], d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/kube-apiserver:v1.37.2"
		return b.c.Update(ctx, d)
	})
	if err != nil {
		stopSampling()
		return err
	}
	sent := time.Since(changed)
	err = b.waitJournals(ctx, o.journals, 2)
	recorded := time.Since(changed)
	stopSampling()
	<-sampled
	if err != nil {
		return err
	}
	writesAfter, err := writes()
	if err != nil {
		return err
	}
	conflictsAfter, err := conflicts()
	if err != nil {
		return err
	}
	peak := 0.0
	for _, n := range perSecond {
		peak = max(peak, n)
	}
	report("journal-burst-updates-sent", sent.Seconds(), "s")
	report("journal-burst-all-recorded", recorded.Seconds(), "s")
	report("journal-burst-writes", writesAfter-writesBefore, "writes")
	report("journal-burst-writes-per-workload", (writesAfter-writesBefore)/float64(o.journals), "writes")
	report("journal-burst-writes-per-second", (writesAfter-writesBefore)/recorded.Seconds(), "writes/s")
	report("journal-burst-writes-peak-per-second", peak, "writes/s")
	report("journal-burst-write-conflicts", conflictsAfter-conflictsBefore, "conflicts")
	count, size, err = b.journalBytes(ctx)
	if err != nil {
		return err
	}
	report("journal-etcd-bytes-after-burst", float64(size)/(1<<20), "MiB")
	report("journal-etcd-bytes-per-journal-after-burst", float64(size)/float64(max(count, 1)), "bytes")
	return b.leaderMemory("journal-leader-after-burst")
}

// journalDeployment is a tenant's kube-apiserver Deployment scaled to none: kube still
// gives it a ReplicaSet, which is the revision its journal records.
func journalDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-apiserver",
					Image: "registry.example/kube-apiserver:v1.37.1", Args: []string{"--etcd-servers=https://etcd:2379", "--secure-port=6443"}}}}}}}
}

// startControllerManager runs the test bed's kube-controller-manager with only kube's
// Deployment and ReplicaSet controllers, against the bench's API server.
func (b *bench) startControllerManager() (*exec.Cmd, error) {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
	log, err := os.Create(filepath.Join(filepath.Dir(b.proc.Kubeconfig), "kube-controller-manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig="+b.proc.Kubeconfig, "--controllers=deployment,replicaset",
		"--leader-elect=false", "--secure-port=0", "--kube-api-qps=500", "--kube-api-burst=1000",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager (%s): %w", bin, err)
	}
	fmt.Fprintf(os.Stderr, "bench: kube-controller-manager pid %d; log %s\n", cmd.Process.Pid, log.Name())
	return cmd, nil
}

// waitJournals waits until want Deployments' journals hold at least revisions revisions.
func (b *bench) waitJournals(ctx context.Context, want, revisions int) error {
	var have int
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		cms, err := b.listJournals(ctx)
		if err != nil {
			return false, err
		}
		have = 0
		for i := range cms.Items {
			if j, err := journal.Decode(&cms.Items[i]); err == nil && j.Kind == v1alpha1.KindDeployment && len(j.Revisions) >= revisions {
				have++
			}
		}
		return have >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d journals hold %d revisions: %w", have, want, revisions, err)
	}
	return nil
}

// journalBytes counts the journals and sums their size as the API server stores them in
// etcd (its protobuf encoding, managed fields included).
func (b *bench) journalBytes(ctx context.Context) (int, int, error) {
	cms, err := b.listJournals(ctx)
	if err != nil {
		return 0, 0, err
	}
	scheme := harness.NewScheme()
	enc := protobuf.NewSerializer(scheme, scheme)
	size := 0
	for i := range cms.Items {
		cm := &cms.Items[i]
		cm.ResourceVersion = "" // etcd keeps it as the key's revision, not in the value
		cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		var buf bytes.Buffer
		if err := enc.Encode(cm, &buf); err != nil {
			return 0, 0, err
		}
		size += buf.Len()
	}
	return len(cms.Items), size, nil
}

// listJournals lists the revision journals in holdfast's namespace.
func (b *bench) listJournals(ctx context.Context) (*corev1.ConfigMapList, error) {
	cms := &corev1.ConfigMapList{}
	err := b.c.List(ctx, cms, client.InNamespace(holdfastNamespace), client.MatchingLabels{journal.ComponentLabel: journal.Component})
	return cms, err
}

// leaderMemory reports the replica's resident memory and its live heap after a forced
// collection.
func (b *bench) leaderMemory(prefix string) error {
	mib, err := rss(b.cmd.Process.Pid)
	if err != nil {
		return err
	}
	if err := b.saveHeapProfile(fmt.Sprintf("_output/bench/heap-%s.pb.gz", prefix)); err != nil { // collects first
		return err
	}
	m, err := b.metrics("go_memstats_heap_alloc_bytes")
	if err != nil {
		return err
	}
	report(prefix+"-rss", mib, "MiB")
	report(prefix+"-live-heap", m[0]/(1<<20), "MiB")
	return nil
}

// deleteJournalWorkloads deletes the measurement's Deployments and ReplicaSets (the bench
// runs no garbage collector), then their journals, which the leader keeps a while after
// a workload is deleted (a re-create under its name continues from them).
func (b *bench) deleteJournalWorkloads(nss []string) {
	ctx := context.Background()
	for _, ns := range nss {
		_ = b.c.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(ns))
		_ = b.c.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(ns))
	}
	cms, err := b.listJournals(ctx)
	if err != nil {
		return
	}
	_ = parallel(ctx, 4*runtime.NumCPU(), len(cms.Items), func(ctx context.Context, i int) error {
		if j, err := journal.Decode(&cms.Items[i]); err == nil && slices.Contains(nss, j.Namespace) {
			_ = b.c.Delete(ctx, &cms.Items[i])
		}
		return nil
	})
}
