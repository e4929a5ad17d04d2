package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// measure runs fault under load with settle time on both sides and returns what the
// load saw meanwhile.
func (h *rig) measure(fault func() error) (counts, error) {
	before, noReady, since := h.load.snapshot(), h.lb.NoReady(), time.Now()
	time.Sleep(h.o.settle)
	if err := fault(); err != nil {
		return counts{}, err
	}
	time.Sleep(h.o.settle)
	got := h.load.snapshot().minus(before)
	if got.failed > 0 {
		// What the balancer saw says whether the failed requests found no ready replica.
		fmt.Fprintf(os.Stderr, "faults: %d failed, %d found no ready replica; the last: %s\n", got.failed, h.lb.NoReady()-noReady, h.load.lastErr())
		h.printTimeline(since)
	}
	return got, nil
}

// printTimeline prints the replicas' starts and stops and the readiness changes the
// balancer saw since t, in order.
func (h *rig) printTimeline(since time.Time) {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for _, c := range h.lb.ReadinessChanges(since) {
		lines = append(lines, line{c.At, c.String()})
	}
	h.mu.Lock()
	for _, e := range h.timeline {
		if !e.at.Before(since) {
			lines = append(lines, line{e.at, e.at.Format("15:04:05.000") + " " + e.what})
		}
	}
	h.mu.Unlock()
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	for _, l := range lines {
		fmt.Fprintln(os.Stderr, "faults:  ", l.text)
	}
}

// rollingRestart stops each replica in turn with SIGTERM and starts it again: in-flight
// requests drain and the balancer stops sending to a replica whose readiness fails, so no
// admission fails.
func (h *rig) rollingRestart(ctx context.Context) error {
	got, err := h.measure(func() error {
		for i := range h.procs {
			h.stopReplica(i, syscall.SIGTERM)
			if err := h.startReplica(ctx, i); err != nil {
				return err
			}
			// As a rolling update does, the next replica stops only once this one's
			// endpoint is ready again.
			if err := h.lb.WaitReady(ctx, i, time.Minute); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("RELIABILITY restart-under-load failed=%d requests=%d wronglyAllowed=%d\n", got.failed, got.sent, got.wronglyAllowed)
	h.promise(got.failed == 0 && got.wronglyAllowed == 0 && got.sent > 0, fmt.Sprintf("rolling restart: %+v (last error: %s)", got, h.load.lastErr()))
	return nil
}

// ReadinessLag is how long the balancer may take to see a replica's readiness change.
const ReadinessLag = 500 * time.Millisecond

// kill SIGKILLs one replica: at most the requests it was answering, and those the
// balancer sends it before its readiness fails, may fail; none may be wrongly allowed.
func (h *rig) kill(ctx context.Context) error {
	var inFlight int64
	got, err := h.measure(func() error {
		sampled, lostBefore := h.lb.InFlight(0), h.lb.Lost(0)
		h.stopReplica(0, syscall.SIGKILL)
		time.Sleep(2 * ReadinessLag)
		// In flight at the kill: those the balancer saw die unanswered with the replica
		// (the sample just before the kill can miss one that arrived in between).
		inFlight = max(sampled, h.lb.Lost(0)-lostBefore)
		return h.startReplica(ctx, 0)
	})
	if err != nil {
		return err
	}
	fmt.Printf("RELIABILITY kill-under-load failed=%d inFlightAtKill=%d requests=%d wronglyAllowed=%d\n", got.failed, inFlight, got.sent, got.wronglyAllowed)
	h.promise(got.wronglyAllowed == 0, "SIGKILL: a forbidden change was allowed")
	if got.failed > inFlight {
		// The API server retries a webhook call whose connection was reset; failures beyond
		// the requests in flight are the window before the balancer drops the replica.
		fmt.Fprintf(os.Stderr, "faults: SIGKILL: %d failures, %d in flight at the kill (last error: %s)\n", got.failed, inFlight, h.load.lastErr())
	}
	h.promise(got.failed <= inFlight, fmt.Sprintf("SIGKILL: %d failures > %d requests in flight", got.failed, inFlight))
	return nil
}

// failover SIGKILLs the leader: the other replica takes the lease within its duration
// plus 5 s and its PDB generator acts.
func (h *rig) failover(ctx context.Context) error {
	leader, err := h.leader(ctx)
	if err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: holdfastNamespace, Name: "holdfast.holdfast.dev"}
	if err := h.c.Get(ctx, key, lease); err != nil {
		return err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	killed := time.Now()
	h.stopReplica(leader, syscall.SIGKILL)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, h.o.lease+30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := h.c.Get(ctx, key, lease); err != nil {
			return false, nil
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "") != holder && ptr.Deref(lease.Spec.HolderIdentity, "") != "", nil
	})
	if err != nil {
		return fmt.Errorf("no replica took over the lease from %s", holder)
	}
	took := time.Since(killed)
	// The new leader's PDB generator acts on a policy created after the failover.
	pdbAfter, err := h.pdbGenerated(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("RELIABILITY leader-failover seconds=%.1f lease=%s pdbGeneratedSeconds=%.1f\n", took.Seconds(), h.o.lease, pdbAfter.Seconds())
	h.promise(took <= h.o.lease+5*time.Second, fmt.Sprintf("failover took %s, more than the lease %s plus 5s", took, h.o.lease))
	return h.startReplica(ctx, leader)
}

// leader finds the replica whose controllers lead, from its leader_election_master_status metric.
func (h *rig) leader(ctx context.Context) (int, error) {
	for range 100 {
		for i, p := range h.procs {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p.MetricsPort))
			if err != nil {
				continue
			}
			metrics, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err == nil && strings.Contains(string(metrics), "leader_election_master_status{name=\"holdfast.holdfast.dev\"} 1") {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no replica reports leadership")
}

// pdbGenerated creates a DisruptionPolicy generating PDBs and a Deployment it selects, and
// returns how long until the PDB exists.
func (h *rig) pdbGenerated(ctx context.Context) (time.Duration, error) {
	name := fmt.Sprintf("failover-%d", time.Now().UnixNano()%100000)
	dp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.DisruptionPolicySpec{
		Targets: v1alpha1.PodTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: loadNamespace}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		PDB:            &v1alpha1.PDBGeneration{Generate: true}}}
	d := utiltesting.MakeDeployment(loadNamespace, name).Replicas(3).Obj()
	start := time.Now()
	for _, obj := range []client.Object{dp, d} {
		if err := h.c.Create(ctx, obj); err != nil {
			return 0, err
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list policyv1.PodDisruptionBudgetList
		if err := h.c.List(ctx, &list, client.InNamespace(loadNamespace)); err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if metav1.IsControlledBy(&p, d) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("no PDB generated for %s after the failover", name)
	}
	return time.Since(start), nil
}

// rotation rotates the serving certificate every o.rotation under load, with every request
// on a new TLS connection, and rotates the CA once with overlap: the bundle trusts both CAs
// before the leaf changes CA, and the old CA only after.
func (h *rig) rotation(ctx context.Context) error {
	h.lb.NewConnections(true)
	defer h.lb.NewConnections(false)
	failedBefore := h.lb.Failed()
	leaf, caRotations := 0, 0
	got, err := h.measure(func() error {
		next, err := harness.NewCA()
		if err != nil {
			return err
		}
		steps := []func() error{
			func() error { leaf++; return h.ca.WriteServing(h.certDir) },
			// CA rotation, step 1: the bundle the client trusts gains the new CA.
			func() error { return h.lb.SetRoots(append(append([]byte{}, h.ca.PEM...), next.PEM...)) },
			// Step 2: the leaf is issued by the new CA.
			func() error { leaf++; caRotations++; h.ca = next; return h.ca.WriteServing(h.certDir) },
			// Step 3: the old CA leaves the bundle.
			func() error { return h.lb.SetRoots(h.ca.PEM) },
			func() error { leaf++; return h.ca.WriteServing(h.certDir) },
		}
		for _, step := range steps {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(h.o.rotation):
			}
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	tlsErrors := h.lb.Failed() - failedBefore
	fmt.Printf("RELIABILITY cert-rotation leafRotations=%d caRotations=%d every=%s tlsErrors=%d failed=%d requests=%d\n",
		leaf, caRotations, h.o.rotation, tlsErrors, got.failed, got.sent)
	h.promise(tlsErrors == 0 && got.failed == 0, fmt.Sprintf("rotation: %d TLS errors, %d failed (last error: %s)", tlsErrors, got.failed, h.load.lastErr()))
	return nil
}

// apiserverOutage cuts holdfast off the API server (every connection dropped, new ones
// refused) while the API server keeps calling the webhooks: decisions come from the
// stale caches meanwhile, so what the policies forbid stays forbidden; afterwards the
// caches recover and a new policy is enforced.
func (h *rig) apiserverOutage(ctx context.Context) error {
	var recovered time.Duration
	got, err := h.measure(func() error {
		h.link.cut(h.o.outage)
		time.Sleep(h.o.outage)
		back := time.Now()
		// A policy created now reaches the replicas once their watches are back.
		p := utiltesting.MakeRolloutPolicy("after-outage").Kinds(v1alpha1.KindStatefulSet).
			NamespaceSelector(map[string]string{corev1.LabelMetadataName: loadNamespace}).
			ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
		if err := h.c.Create(ctx, p); err != nil {
			return err
		}
		probe := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: loadNamespace, Name: "probe"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "konnectivity-server", Image: "x", Args: []string{"--server-count=1"}}}}}}}
		// Both replicas must deny it: probe through the balancer until several denials in a row.
		denied := 0
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := h.c.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
				denied++
			} else {
				denied = 0
			}
			return denied >= 10, nil
		})
		if err != nil {
			return fmt.Errorf("the replicas never enforced a policy created after the outage")
		}
		recovered = time.Since(back)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("RELIABILITY apiserver-outage seconds=%s wronglyAllowed=%d failed=%d requests=%d cacheRecoverySeconds=%.1f\n",
		h.o.outage, got.wronglyAllowed, got.failed, got.sent, recovered.Seconds())
	h.promise(got.wronglyAllowed == 0, "API server outage: a forbidden change was allowed")
	return nil
}

// webhooksDown stops both replicas with failurePolicy Fail: guarded changes fail closed,
// while holdfast's own Deployment can still be updated and scaled, leases and nodes are
// never matched, and a Deployment and a pod in a namespace no policy selects are never
// sent to holdfast: the Deployment updates and the pod is evicted.
func (h *rig) webhooksDown(ctx context.Context) error {
	h.load.stop()
	own := utiltesting.MakeDeployment(holdfastNamespace, "holdfast").Replicas(2).Obj()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "faults-probe"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "faults-node"}}
	if err := harness.EnsureNamespace(ctx, h.c, "faults-unguarded"); err != nil {
		return err
	}
	unguarded := utiltesting.MakeDeployment("faults-unguarded", "coredns").Replicas(2).Obj()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "faults-unguarded", Name: "cni-agent"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/main:1"}}}}
	for _, obj := range []client.Object{own, lease, node, unguarded, pod} {
		if err := h.c.Create(ctx, obj); err != nil {
			return err
		}
	}
	for i := range h.procs {
		h.stopReplica(i, syscall.SIGTERM)
	}
	check := func(what string, err error) string {
		h.promise(err == nil, fmt.Sprintf("webhooks down: %s: %v", what, err))
		if err != nil {
			return "failed"
		}
		return "ok"
	}
	own.Spec.Template.Annotations = map[string]string{"faults.holdfast.dev/restart": "1"}
	ownUpdate := check("updating holdfast's own Deployment", h.c.Update(ctx, own))
	ownScale := check("scaling holdfast's own Deployment", h.c.Patch(ctx, own, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`))))
	lease.Spec.HolderIdentity = ptr.To("b")
	leases := check("updating a Lease", h.c.Update(ctx, lease))
	node.Labels = map[string]string{"faults.holdfast.dev/probe": "1"}
	nodes := check("updating a Node", h.c.Update(ctx, node))
	unguarded.Spec.Template.Spec.Containers[0].Image = "registry.example/main:2"
	unguardedOK := check("updating a Deployment no policy selects", h.c.Update(ctx, unguarded)) == "ok"
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	unguardedOK = check("evicting a pod in a namespace no policy selects", h.c.SubResource("eviction").Create(ctx, pod, eviction)) == "ok" && unguardedOK
	unguardedResult := "ok"
	if !unguardedOK {
		unguardedResult = "failed"
	}
	guarded := "refused"
	d := h.load.base.DeepCopy()
	d.Spec.Template.Annotations = map[string]string{"faults.holdfast.dev/down": "1"}
	if err := h.c.Update(ctx, d, client.DryRunAll); err == nil {
		guarded = "allowed"
	}
	h.promise(guarded == "refused", "webhooks down with failurePolicy Fail: a guarded change went through")
	fmt.Printf("RELIABILITY webhooks-down-fail ownUpdate=%s ownScale=%s leases=%s nodes=%s unguarded=%s guarded=%s\n", ownUpdate, ownScale, leases, nodes, unguardedResult, guarded)
	return nil
}
