package eviction

import (
	"context"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func evictionRequest(kind, resource, sub, name string, body string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: kind},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: resource},
		SubResource: sub, Name: name, Namespace: "kube-system", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: []byte(body)},
	}}
}

// TestBadEvictionRequests checks requests the API server itself would reject first, sent
// straight at the handler: each gets 400 with the reason, before any lookup.
func TestBadEvictionRequests(t *testing.T) {
	h := &Handler{Clock: clock.RealClock{}} // no reader: bad input must not reach one
	cases := map[string]admission.Request{
		"body names another pod":       evictionRequest("Eviction", "pods", "eviction", "agent-1", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"agent-2","namespace":"kube-system"}}`),
		"body in another namespace":    evictionRequest("Eviction", "pods", "eviction", "agent-1", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"agent-1","namespace":"default"}}`),
		"undecodable body":             evictionRequest("Eviction", "pods", "eviction", "agent-1", `{"metadata":`),
		"not an eviction":              evictionRequest("Pod", "pods", "", "agent-1", `{}`),
		"eviction of another resource": evictionRequest("Eviction", "nodes", "eviction", "agent-1", `{}`),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), req)
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || resp.Result.Message == "" {
				t.Errorf("response = %+v, want 400 with a reason", resp.Result)
			}
		})
	}
}
