package eviction

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// countingReader counts the Lists of pods it serves.
type countingReader struct {
	client.Reader
	podLists int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		r.podLists++
	}
	return r.Reader.List(ctx, list, opts...)
}

// TestAdmittedEvictionCountsThePodsAsTheAPIServerHasThem: this replica's cache still shows
// an agent Ready that went down a moment ago (its replacement is not Ready yet); the
// eviction of the other agent, judged on the cache, would take the group over its budget
// of one. An eviction the cache's pods would admit is judged again on the group's pods
// read from the API server, and deferred; one the cache already defers costs no read.
// The fleet explorer found the admitted one (seed 37127: two of a StatefulSet's two pods
// down under a budget of one).
func TestAdmittedEvictionCountsThePodsAsTheAPIServerHasThem(t *testing.T) {
	objs, pod := agentGroup(nil) // agent-0 not Ready, agent-1 Ready
	stale := make([]client.Object, len(objs))
	for i, o := range objs {
		stale[i] = o
		if p, ok := o.(*corev1.Pod); ok && p.Name == "agent-0" {
			ready := p.DeepCopy()
			ready.Status.Conditions[0].Status = corev1.ConditionTrue
			stale[i] = ready
		}
	}
	p := dp(nil)
	handler := func(cached []client.Object, live *countingReader) *Handler {
		return &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(cached, &p)...),
			APIReader: live, Clock: clocktesting.NewFakeClock(time.Now()), Holds: &Holds{},
			Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}}
	}
	live := &countingReader{Reader: utiltesting.NewMemReader(nil, objs...)}
	resp := handler(stale, live).Handle(context.Background(), podEviction(pod, "alice"))
	if resp.Allowed || resp.Result.Code != 429 {
		t.Errorf("the second agent evicted while the first is down, which the cache does not show yet: %+v, want 429", resp.Result)
	}
	if live.podLists == 0 {
		t.Errorf("the group's pods were not read from the API server")
	}
	fresh := &countingReader{Reader: utiltesting.NewMemReader(nil, objs...)}
	if resp := handler(objs, fresh).Handle(context.Background(), podEviction(pod, "alice")); resp.Allowed {
		t.Errorf("control, the cache up to date: %+v, want 429", resp.Result)
	}
	if fresh.podLists != 0 {
		t.Errorf("an eviction the cache's pods defer read the pods live %d times", fresh.podLists)
	}
	// Both up: admitted, on one read.
	up := &countingReader{Reader: utiltesting.NewMemReader(nil, stale...)}
	if resp := handler(stale, up).Handle(context.Background(), podEviction(pod, "alice")); !resp.Allowed {
		t.Errorf("both agents up: %+v, want admitted", resp.Result)
	}
	if up.podLists != 1 {
		t.Errorf("an admitted eviction read the pods live %d times, want 1", up.podLists)
	}
}
