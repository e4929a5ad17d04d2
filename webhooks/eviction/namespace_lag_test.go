package eviction

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestNamespaceRelabelledInIsReadLive: a namespace relabelled into a DisruptionPolicy's
// namespaceSelector a moment ago may still show its old labels in this replica's cache.
// An eviction there of a pod the policy's selector matches is judged with the namespace
// read from the API server: one agent is down already, and the eviction of the other is
// deferred, as a replica whose cache has caught up defers it. The read is best effort: a
// live read that times out leaves the cache's labels to decide, as before.
func TestNamespaceRelabelledInIsReadLive(t *testing.T) {
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"agents": "guarded"}}
	})
	objs, pod := agentGroup(nil)
	relabelled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system",
		Labels: map[string]string{corev1.LabelMetadataName: "kube-system", "agents": "guarded"}}}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(live client.Reader) *Handler {
		return &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
			APIReader: live, Clock: clocktesting.NewFakeClock(time.Now()), Holds: &Holds{}, Metrics: m,
			Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}}
	}
	stale := utiltesting.NewMemReader(nil, objs...)
	if resp := handler(stale).Handle(context.Background(), podEviction(pod, "alice")); !resp.Allowed {
		t.Fatalf("control, the namespace outside the selection as the API server has it too: %+v, want admitted", resp.Result)
	}
	fresh := utiltesting.NewMemReader(nil, append(objs[:len(objs):len(objs)], relabelled)...)
	if resp := handler(fresh).Handle(context.Background(), podEviction(pod, "alice")); resp.Allowed || resp.Result.Code != 429 {
		t.Errorf("the second agent evicted in a namespace relabelled in a moment ago: %+v, want 429", resp.Result)
	}
	slow := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			return apierrors.NewServerTimeout(corev1.Resource("namespaces"), "get", 1)
		},
	})
	if resp := handler(slow).Handle(context.Background(), podEviction(pod, "alice")); !resp.Allowed {
		t.Errorf("the namespace's live read timed out: %+v, want judged on the cache's labels (admitted)", resp.Result)
	}
	if got := utiltesting.Counts(t, reg, "holdfast_eviction_namespace_live_reads_total"); got["result=read"] != 2 || got["result=failed"] != 1 {
		t.Errorf("namespaces read live: %v, want 2 read and 1 failed", got)
	}
}

// deadlineOf is a Replacements that records the deadline its reads would be bounded by.
type deadlineOf struct{ seen *[]time.Time }

func (d deadlineOf) Replacement(ctx context.Context, deadline budget.Deadline, _ *corev1.Pod, _ map[string]string, _ authenticationv1.UserInfo) (decision.Violations, bool, error) {
	ctx, cancel := deadline.Bound(ctx)
	defer cancel()
	at, _ := ctx.Deadline()
	*d.seen = append(*d.seen, at)
	return nil, false, nil
}

// TestOneDeadlineForAnEvictionsReads: each live read an eviction makes (the pod this
// replica's cache lacks, the namespace relabelled a moment ago, the rollout guard's
// reading of its replacement, the group's reads and ledger) was bounded by the ledgers'
// timeout from its own start, so that together they could outlast the webhook's timeout
// of 3 s, where the API server gives up on holdfast and the eviction passes under
// failurePolicy Ignore. They share one deadline, the request's.
func TestOneDeadlineForAnEvictionsReads(t *testing.T) {
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"agents": "guarded"}}
	})
	objs, pod := agentGroup(nil)
	relabelled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system",
		Labels: map[string]string{corev1.LabelMetadataName: "kube-system", "agents": "guarded"}}}
	var seen []time.Time
	record := func(ctx context.Context) {
		at, ok := ctx.Deadline()
		if !ok {
			t.Errorf("a live read without a deadline")
		}
		seen = append(seen, at)
	}
	live := interceptor.NewClient(fake.NewClientBuilder().WithObjects(append(objs[1:2:2], relabelled, pod)...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			record(ctx)
			time.Sleep(20 * time.Millisecond) // each read takes a while: bounds from their own starts would differ
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			record(ctx)
			return c.List(ctx, list, opts...)
		},
	})
	cached := []client.Object{&p}
	for _, o := range objs {
		if o.GetName() != pod.Name {
			cached = append(cached, o) // this replica has not seen the pod yet
		}
	}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, cached...),
		APIReader: live, Clock: clocktesting.NewFakeClock(time.Now()), Holds: &Holds{}, Replacements: deadlineOf{&seen},
		Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}}
	h.Handle(context.Background(), podEviction(pod, "alice"))
	if len(seen) < 3 {
		t.Fatalf("deadlines seen: %v, want the pod's, the namespace's and the replacement's at least", seen)
	}
	for _, at := range seen[1:] {
		if !at.Equal(seen[0]) {
			t.Errorf("deadlines %v: want one for the request", seen)
			break
		}
	}
}
