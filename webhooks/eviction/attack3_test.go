package eviction

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

func attackOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("HOLDFAST_ATTACK") == "" {
		t.Skip("attack scenario: set HOLDFAST_ATTACK=1 to run")
	}
}

// TestAttackTopologyUnrelatedReplacementFreesZone: a replacement created for another
// reason (the re-creation of a pod that holdfast never took down: a crash, a node-pressure
// eviction, a manual delete in zone c) is counted as the replacement of zone a's admitted
// eviction, whose own replacement is not available. Zone a still has a pod down, and the
// drain is let into zone b: two zones down at once under maxDisruptedDomains 1.
func TestAttackTopologyUnrelatedReplacementFreesZone(t *testing.T) {
	attackOnly(t)
	g := zonal(v1alpha1.KindDeployment)
	// 12:00-20s: holdfast admits the eviction of p0 (zone a); its replacement does not
	// become available (unschedulable, pulling, crash-looping).
	ra := gone(g, 0, 20*time.Second)
	// 12:00-15s: p4 (zone c) is deleted by someone else (not recorded: holdfast did not
	// take it down); the ReplicaSet re-creates it as p4r, available 5s ago.
	g.Pods[3].UID, g.Pods[3].Name = "u4-gone", "p4-gone" // index 3 is p4 after p0 left
	g.Pods = append(g.Pods[:3], g.Pods[4:]...)
	replacement(g, "p4r", 15*time.Second, 5*time.Second)
	i := 1 // p2, zone b (p0 is gone: p1 p2 p3 p5 p4r)
	if g.Pods[i].Name != "p2" {
		t.Fatalf("pod %d is %s", i, g.Pods[i].Name)
	}
	in := Input{Pod: g.Pods[i], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: []budget.Eviction{ra},
		Policies: []v1alpha1.DisruptionPolicy{zoned(nil)}, User: authenticationv1.UserInfo{Username: "admin"},
		Identity: "self", Now: now, Domains: zoneOf(2)}
	d := Decide(in)
	if d.Action() != decision.Deny {
		t.Fatalf("the eviction of p2 in zone b was admitted while zone a's admitted eviction (p0) has no available replacement "+
			"(p4r replaced a zone-c pod holdfast never took down): two zones down under maxDisruptedDomains 1; violations %v", d.Violations)
	}
}

// TestAttackReleaseCountsAnotherPolicysHold: a pod's hold time (Holds) is per pod, not per
// policy. Policy "freeze" (no afterMaxHold) holds the drain for an hour with a Deny window;
// policy "agents" (afterMaxHold Release, maxHold 30s, cooldown 10m) holds nothing during
// it. When the window ends an eviction of another agent was admitted a moment before (by a
// requester the freeze exempts), so "agents"' cooldown now defers the pod: its own hold has
// lasted no time at all, yet it is released at once, because the freeze's hour counts as
// its maxHold.
func TestAttackReleaseCountsAnotherPolicysHold(t *testing.T) {
	attackOnly(t)
	agents := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		release(s)
		s.Cooldown = &metav1.Duration{Duration: 10 * time.Minute}
	})
	freeze := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 10 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}
	})
	freeze.Name = "freeze"
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
			q.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
		}
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	ledgers := &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &agents, &freeze)...),
		Clock: clk, Ledgers: ledgers, Holds: &Holds{}, Events: &events.Limiter{Recorder: &eventLog{}}}
	body, _ := json.Marshal(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body},
		UserInfo: authenticationv1.UserInfo{Username: "alice"}}}
	// The drain retries every 30s through the freeze window: deferred by the window alone.
	for clk.Now().Before(time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)) {
		resp := h.Handle(context.Background(), req)
		if resp.Allowed || resp.Result.Code != http.StatusTooManyRequests {
			t.Fatalf("at %s answered %d, want 429 inside the freeze", clk.Now().Format(time.TimeOnly), resp.Result.Code)
		}
		if clk.Now().Equal(time.Date(2026, 11, 30, 10, 59, 30, 0, time.UTC)) {
			// Another agent's eviction, admitted for a requester the freeze exempts.
			g, err := ledgers.ReadGroup(context.Background(), "ds")
			if err != nil {
				t.Fatal(err)
			}
			if err := g.RecordEviction(context.Background(), ledgers, budget.Eviction{Pod: "other", UID: "other", At: clk.Now(), By: "replica-0"}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(30 * time.Second)
	}
	// 11:00:00: the window has ended; "agents"' cooldown (10m, from 10:59:30) is the only
	// hold, and it has held the pod for no time at all.
	resp := h.Handle(context.Background(), req)
	t.Logf("at 11:00:00 allowed=%v message=%q audit=%v", resp.Allowed, resp.Result.Message, resp.AuditAnnotations)
	if resp.Allowed {
		t.Fatalf("released at once when the freeze ended (audit %q): policy agents' own hold (its cooldown) had lasted 0s, "+
			"not its maxHold of 30s; the hour counted was policy freeze's, which does not release", resp.AuditAnnotations[RuleMaxHold])
	}
}

// TestAttackTopologyPromptReplacementUnseenByOtherReplica: kube's ReplicaSet controller
// creates a replacement within a second of the eviction, but a record written by another
// replica counts only pods created MaxClockSkew (5s) after it as replacements. While the
// group is not whole for another reason (one pod NotReady on a failing node in zone c),
// zone a's available replacement is never seen by this replica, and every eviction it
// decides in zone b waits the full replacementTimeout (10m), while the replica that wrote
// the record admits it at once.
func TestAttackTopologyPromptReplacementUnseenByOtherReplica(t *testing.T) {
	attackOnly(t)
	g := zonal(v1alpha1.KindDeployment)
	g.Pods[4].Ready = false // p4, zone c: its node failing; holdfast took nothing down there
	ra := gone(g, 0, time.Minute)
	ra.By = "replica-1"
	// The ReplicaSet controller's replacement, created 0.5s after the eviction, Ready 30s.
	replacement(g, "p0r", time.Minute-500*time.Millisecond, 30*time.Second)
	i := 1 // p2, zone b
	in := Input{Pod: g.Pods[i], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: []budget.Eviction{ra},
		Policies: []v1alpha1.DisruptionPolicy{zoned(nil)}, User: authenticationv1.UserInfo{Username: "admin"},
		Identity: "replica-0", Now: now, Domains: zoneOf(2)}
	if d := Decide(in); d.Action() == decision.Deny {
		t.Fatalf("zone a's eviction has an available replacement (created 0.5s after it), yet this replica holds zone b for %s: %s",
			d.Wait().Round(time.Second), d.Denial())
	}
	// The writer's own view admits it: the two replicas disagree for replacementTimeout.
	in.Records[0].By = "replica-0"
	if d := Decide(in); d.Action() == decision.Deny {
		t.Fatalf("the writing replica holds too: %s", d.Denial())
	}
}

// TestAttackTopologyRecordOutlivedByReplacementTimeout: the ledger keeps records for
// budget.Retention, which knows cooldowns but not topologyBudget.replacementTimeout. With
// a replacementTimeout of 3h and no cooldown, the sweeper deletes the group's ledger an
// hour after zone a's admitted eviction: zone a, whose pod is still not replaced, no longer
// counts, and the drain goes into zone b two hours before the bound.
func TestAttackTopologyRecordOutlivedByReplacementTimeout(t *testing.T) {
	ctx := context.Background()
	p := zoned(func(s *v1alpha1.DisruptionPolicySpec) {
		s.TopologyBudget.ReplacementTimeout = &metav1.Duration{Duration: 3 * time.Hour}
	})
	policies := []v1alpha1.DisruptionPolicy{p}
	g := zonal(v1alpha1.KindDeployment)
	for i := range g.Pods {
		g.Pods[i].Created = now.Add(-2 * time.Hour) // all there before the eviction
	}
	at := now.Add(-61 * time.Minute)
	ra := gone(g, 0, 61*time.Minute) // no replacement available since (no capacity in zone a)
	ra.By = "self"
	ledgers := &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "self"}
	lg, err := ledgers.ReadGroup(ctx, g.UID)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.RecordEviction(ctx, ledgers, ra, budget.Retention(policies)); err != nil {
		t.Fatal(err)
	}
	// The sweeper's pass, with the retention it computes from the policies.
	if _, err := ledgers.Sweep(ctx, budget.Retention(policies), now); err != nil {
		t.Fatal(err)
	}
	if lg, err = ledgers.ReadGroup(ctx, g.UID); err != nil {
		t.Fatal(err)
	}
	in := Input{Pod: g.Pods[1], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: lg.Records,
		Policies: policies, User: authenticationv1.UserInfo{Username: "admin"}, Identity: "self", Now: now, Domains: zoneOf(2)}
	if d := Decide(in); d.Action() != decision.Deny {
		t.Fatalf("p2 in zone b admitted %s after zone a's eviction (at %s), whose pod is not replaced, under replacementTimeout 3h: "+
			"the ledger kept %d record(s) (retention %s)", now.Sub(at), at.Format(time.TimeOnly), len(lg.Records), budget.Retention(policies))
	}
}

// TestAttackReleaseLostToPDBLag: a released eviction ends the pod's hold (Holds.Ended) as
// soon as holdfast admits it. kube's PodDisruptionBudget check runs after the webhook and
// its status lags the pods (the disruption controller recounts a moment after a
// replacement is Ready), so kube may still answer 429: the pod stays, the drain retries 5s
// later, and holdfast holds it again from zero, for another full maxHold, by the very holds
// it had already released (the cooldown of another pod's eviction).
func TestAttackReleaseLostToPDBLag(t *testing.T) {
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		release(s)
		s.Cooldown = &metav1.Duration{Duration: time.Hour}
	})
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
		}
	}
	clk := clocktesting.NewFakeClock(time.Now())
	ledgers := &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
		Clock: clk, Ledgers: ledgers, Holds: &Holds{}, Events: &events.Limiter{Recorder: &eventLog{}}}
	g, err := ledgers.ReadGroup(context.Background(), "ds")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RecordEviction(context.Background(), ledgers, budget.Eviction{Pod: "gone", UID: "gone", At: clk.Now().Add(-time.Minute), By: "replica-0"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body},
		UserInfo: authenticationv1.UserInfo{Username: "alice"}}}
	released := false
	for range 10 {
		if resp := h.Handle(context.Background(), req); resp.Allowed {
			released = true
			break
		}
		clk.Step(5 * time.Second)
	}
	if !released {
		t.Fatal("never released")
	}
	// kube's PDB answered 429 after the webhook: the pod is still there, Ready. The drain
	// retries 5s later.
	clk.Step(5 * time.Second)
	if resp := h.Handle(context.Background(), req); !resp.Allowed {
		t.Fatalf("the retry after kube's PDB refused the released eviction is held again (for another maxHold): %s", resp.Result.Message)
	}
}
