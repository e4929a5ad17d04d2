package eviction

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// heldStart is the rollout guard's Replacement for a pod whose replacement would start a
// staged template a Deny window holds.
type heldStart struct{}

func (heldStart) Replacement(context.Context, budget.Deadline, *corev1.Pod, map[string]string, authenticationv1.UserInfo) (decision.Violations, bool, error) {
	return decision.Violations{{Policy: "agents-rollouts", Rule: "window", Action: decision.Deny,
		Message: "DaemonSet kube-system/agent: the Deny window freeze is open"}}, true, nil
}

// TestReplacementRefusalOfADeleteHasNoRetryAfter: a held DELETE is answered 429
// without a retry-after (TestDeleteRefusalShape: client-go retries a 429 that carries one up
// to ten times inside the DELETE call). refuseReplacement answers DELETEs as evictions, with
// RetryAfterSeconds: `kubectl delete pod` then sits through ten retries of 10 s.
func TestReplacementRefusalOfADeleteHasNoRetryAfter(t *testing.T) {
	h, req := deleteScene(t, true)
	h.Replacements = heldStart{}
	resp := h.Handle(context.Background(), req)
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests {
		t.Fatalf("response = %+v, want 429", resp.Result)
	}
	if d := resp.Result.Details; d == nil || d.RetryAfterSeconds != 0 {
		t.Errorf("the refused DELETE carries details %+v: a retry-after makes client-go retry it inside the DELETE call", d)
	}
}

// TestReplacementRefusalIsCounted: an eviction the replacement judgement refuses is
// a drain held like any deferral, yet it is answered before the eviction guard observes
// anything: holdfast_eviction_requests_total and holdfast_eviction_reviews_total do not
// count it (nor does the rollout guard's Replacement count it anywhere), no hold is kept
// (maxHold, holdfast_eviction_longest_hold_seconds, EvictionHeldTooLong and
// EvictionOutlastsDrainer on the node), so HoldfastEvictionsDeferredLong and
// HoldfastEvictionHeldTooLong never fire for a drain held for a whole Deny window.
func TestReplacementRefusalIsCounted(t *testing.T) {
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
		}
	}
	p := dp(nil)
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	holds := &Holds{}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
		APIReader: utiltesting.NewMemReader(nil, objs...), Clock: clocktesting.NewFakeClock(time.Now()), Metrics: m,
		Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}, Holds: holds,
		Replacements: heldStart{}}
	resp := h.Handle(context.Background(), podEviction(pod, "alice"))
	if resp.Allowed || resp.Result.Code != 429 {
		t.Fatalf("%+v, want 429", resp.Result)
	}
	if got := utiltesting.Counts(t, reg, "holdfast_eviction_requests_total"); got["outcome=deferred"] != 1 {
		t.Errorf("holdfast_eviction_requests_total after a refused eviction: %v, want it counted deferred", got)
	}
}
