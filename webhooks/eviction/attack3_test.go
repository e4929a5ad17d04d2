package eviction

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

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
	lg, err := ledgers.ReadGroup(ctx, budget.GroupID{UID: g.UID})
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
	if lg, err = ledgers.ReadGroup(ctx, budget.GroupID{UID: g.UID}); err != nil {
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
	g, err := ledgers.ReadGroup(context.Background(), budget.GroupID{UID: "ds"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RecordEviction(context.Background(), ledgers, budget.Eviction{Pod: "gone", UID: "gone", At: clk.Now().Add(-time.Minute), By: "replica-0"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	req := podEviction(pod, "alice")
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
