package eviction

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
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
