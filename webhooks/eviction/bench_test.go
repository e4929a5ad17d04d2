package eviction

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/review"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// unselectedScene is the common case: a drain evicts an ordinary pod while a
// DisruptionPolicy guards konnectivity-agent in kube-system. holdfast must allow it fast.
func unselectedScene(tb testing.TB) (http.Handler, []byte) {
	tb.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d9f8-x2k4q", UID: "pod-uid",
		Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f8"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	return evictionScene(tb, pod, true)
}

// evictionScene is the eviction of pod, in namespace shop, by a drain, while a
// DisruptionPolicy guards konnectivity-agent in kube-system; the cache holds objs beside
// them. replacements wires the rollout guard's judgement of replacements in, as the server
// wires it (app.Guards).
func evictionScene(tb testing.TB, pod *corev1.Pod, replacements bool, objs ...client.Object) (http.Handler, []byte) {
	tb.Helper()
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "konnectivity-agent"},
		Spec: v1alpha1.DisruptionPolicySpec{
			Targets: v1alpha1.PodTargets{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
				Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{corev1.LabelMetadataName: "shop"}}}
	reader := utiltesting.NewMemReader(nil, append([]client.Object{p, pod, ns}, objs...)...)
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	m := policy.NewMatcher()
	h := &Handler{Reader: reader, Clock: clock, Matcher: m}
	if replacements {
		h.Replacements = &rollout.Handler{Reader: reader, Clock: clock, Matcher: m}
	}

	eviction, err := json.Marshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: pod.Name}})
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  "6a1f0c2e-8d7b-4c1a-9e3f-2b5d7c9e1a40",
			Kind: metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			SubResource: "eviction", Name: pod.Name, Namespace: "shop", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:node-upgrader", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
			Object:   runtime.RawExtension{Raw: eviction}, DryRun: ptr.To(false),
			Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return review.NewWebhook(&admission.Webhook{Handler: h}, nil), body
}

// BenchmarkEvictionUnselected measures the eviction of a pod no DisruptionPolicy selects,
// from request body to response body: the path every eviction in the cluster takes.
func BenchmarkEvictionUnselected(b *testing.B) {
	h, body := unselectedScene(b)
	again := utiltesting.Repeat(h, Path, body)
	rec := again()
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil || ar.Response == nil || !ar.Response.Allowed {
		b.Fatalf("want allowed, got %s (%v)", rec.Body.String(), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		again()
	}
}

// guardedScene is a retrying drain of a guarded DaemonSet agent whose group's budget is
// spent (agentGroup): the eviction, or the DELETE of the pod under guardDeletes, is read,
// matched, grouped, checked against the group's ledger and deferred. The body is the
// AdmissionReview the API server sends for it, at path.
func guardedScene(tb testing.TB, deleting bool) (http.Handler, string, []byte) {
	tb.Helper()
	h, req := deleteScene(tb, true)
	req.DryRun = ptr.To(false)
	path := DeletePath
	if !deleting {
		path = Path
		raw, err := json.Marshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name}})
		if err != nil {
			tb.Fatal(err)
		}
		req.Kind = metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}
		req.SubResource, req.Operation = "eviction", admissionv1.Create
		req.Object, req.OldObject = runtime.RawExtension{Raw: raw}, runtime.RawExtension{}
		req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)}
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &req.AdmissionRequest})
	if err != nil {
		tb.Fatal(err)
	}
	h.Matcher = policy.NewMatcher()
	return review.NewWebhook(&admission.Webhook{Handler: h}, nil), path, body
}

func benchmarkGuarded(b *testing.B, deleting bool) {
	h, path, body := guardedScene(b, deleting)
	again := utiltesting.Repeat(h, path, body)
	rec := again()
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil || ar.Response == nil || ar.Response.Allowed || ar.Response.Result.Code != http.StatusTooManyRequests {
		b.Fatalf("want deferred (429), got %s (%v)", rec.Body.String(), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		again()
	}
}

// BenchmarkEvictionGuarded measures a deferred eviction of a guarded pod, from request
// body to response body.
func BenchmarkEvictionGuarded(b *testing.B) { benchmarkGuarded(b, false) }

// BenchmarkDeleteGuarded measures a deferred DELETE of the same pod under guardDeletes:
// the API server sends the whole pod (oldObject) and the handler reads its node.
func BenchmarkDeleteGuarded(b *testing.B) { benchmarkGuarded(b, true) }
