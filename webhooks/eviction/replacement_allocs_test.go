package eviction

import (
	"encoding/json"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/review"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// TestUnselectedStatefulSetPodAllocs: the eviction of a StatefulSet's pod that no policy
// selects, with a RolloutPolicy targeting StatefulSets in force, costs the fast path
// (BenchmarkEvictionUnselected, 23) and the rollout guard's look at its owner: the policies
// listed, the StatefulSet read from the cache to see its strategy and labels (found by
// review: 50 at first, before the look was ordered to stop at the first answer).
func TestUnselectedStatefulSetPodAllocs(t *testing.T) {
	dp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "konnectivity-agent"},
		Spec: v1alpha1.DisruptionPolicySpec{
			Targets: v1alpha1.PodTargets{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
				Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	rp := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", UID: "sts-uid", Labels: map[string]string{"app": "db"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:2", Args: []string{"--a", "--b"}}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0", UID: "pod-uid",
		Labels:          map[string]string{"app": "db"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{corev1.LabelMetadataName: "shop"}}}
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	reader := utiltesting.NewMemReader(nil, dp, rp, sts, pod, ns)
	m := policy.NewMatcher()
	eviction, _ := json.Marshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: pod.Name}})
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  "6a1f0c2e-8d7b-4c1a-9e3f-2b5d7c9e1a40",
			Kind: metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			SubResource: "eviction", Name: pod.Name, Namespace: "shop", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:node-upgrader"},
			Object:   runtime.RawExtension{Raw: eviction}, DryRun: ptr.To(false),
			Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	})
	measure := func(withReplacements bool) float64 {
		h := &Handler{Reader: reader, Clock: clock, Matcher: m}
		if withReplacements {
			h.Replacements = &rollout.Handler{Reader: reader, Clock: clock, Matcher: m}
		}
		again := utiltesting.Repeat(review.NewWebhook(&admission.Webhook{Handler: h}, nil), Path, body)
		return testing.AllocsPerRun(100, func() { again() })
	}
	without, with := measure(false), measure(true)
	t.Logf("allocs without Replacements %.0f, with %.0f", without, with)
	if with > maxUnselectedAllocs+10 {
		t.Errorf("the eviction of a StatefulSet's pod no policy selects allocates %.0f times with Replacements wired as in production (%.0f without), more than %d", with, without, maxUnselectedAllocs+10)
	}
}
