package eviction

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestRetryLaterCountsUnderThePolicies: while the group's ledger cannot be read in time,
// holdfast defers the eviction itself (retryLater). The drain is held as surely as by a
// rule, so the request counts as deferred under the policy that applies
// (holdfast_eviction_reviews_total), which HoldfastEvictionsDeferredLong reads per policy;
// it counted under none, and a drain stuck on a slow ledger never alerted.
func TestRetryLaterCountsUnderThePolicies(t *testing.T) {
	p := dp(nil)
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
		}
	}
	slow := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewServerTimeout(corev1.Resource("configmaps"), "get", 1)
		},
	})
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
		APIReader: utiltesting.NewMemReader(nil, objs...), Clock: clocktesting.NewFakeClock(time.Now()), Metrics: m,
		Ledgers: &budget.Ledgers{Live: slow, Namespace: "holdfast-system", Identity: "replica-0"}, Holds: &Holds{}}
	body, _ := json.Marshal(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body},
		UserInfo: authenticationv1.UserInfo{Username: "alice"}}})
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 429 {
		t.Fatalf("with the ledger timing out: %+v, want 429", resp.Result)
	}
	if diff := cmp.Diff(map[string]float64{"outcome=deferred,policy=" + p.Name: 1}, utiltesting.Counts(t, reg, "holdfast_eviction_reviews_total")); diff != "" {
		t.Errorf("holdfast_eviction_reviews_total (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"outcome=deferred": 1}, utiltesting.Counts(t, reg, "holdfast_eviction_requests_total")); diff != "" {
		t.Errorf("holdfast_eviction_requests_total (-want +got):\n%s", diff)
	}
}
