package rollout

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestPodRelabelThatReleasesIsJudgedAsAReplacement: an OnDelete StatefulSet's edit to v2
// is staged (every pod runs v1) and a Deny window is open. Relabelling db-0 out of the
// selector makes kube's controller release it and create db-0 again from v2 once the
// released pod is gone (a DaemonSet's at once): v2's first pod, with no eviction or DELETE
// of a pod the StatefulSet controls. The relabel is refused as that eviction would be. A
// relabel that keeps the pod selected, a pod of another owner and a workload the cache
// does not have are admitted; what is not a pod UPDATE is a 400.
func TestPodRelabelThatReleasesIsJudgedAsAReplacement(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := utiltesting.MakeRolloutPolicy("dbs").Kinds(v1alpha1.KindStatefulSet).Selector(map[string]string{"tier": "db"}).Obj()
	p.Spec.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: 59 * time.Minute}, Action: v1alpha1.WindowDeny}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{corev1.LabelMetadataName: "tenant-a"}}}
	reader := utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, ns, p)
	tmpl := func(tag string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db", "tier": "db"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:" + tag}}}}
	}
	sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db", UID: "uid-db", Generation: 2, Labels: map[string]string{"tier": "db"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: tmpl("v2"),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 0,
			CurrentRevision: "db-a", UpdateRevision: "db-b"}}
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl("v1")}})
	reader.Put(&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db-a", UID: "cr-a",
		Labels: map[string]string{"app": "db"}, CreationTimestamp: metav1.NewTime(t0.Add(-3 * time.Hour)), OwnerReferences: controlledBy(sts)},
		Revision: 1, Data: runtime.RawExtension{Raw: raw}})
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db-0", UID: "pod-db-0",
		Labels: map[string]string{"app": "db", "tier": "db", appsv1.ControllerRevisionHashLabelKey: "db-a"}, CreationTimestamp: metav1.NewTime(t0.Add(-3 * time.Hour)),
		OwnerReferences: controlledBy(sts)}, Spec: corev1.PodSpec{NodeName: "node-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-3 * time.Hour))}}}}
	reader.Put(pod)
	reader.Put(sts)
	h := &Handler{Reader: reader, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), Matcher: policy.NewMatcher(), Journals: &journal.Store{}}

	relabel := func(old *corev1.Pod, labels map[string]string) admission.Request {
		obj := old.DeepCopy()
		obj.Labels = labels
		o, _ := json.Marshal(obj)
		s, _ := json.Marshal(old)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: old.Namespace, Name: old.Name, Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: o}, OldObject: runtime.RawExtension{Raw: s}, UserInfo: authenticationv1.UserInfo{Username: "alice"}}}
	}
	resp := h.HandlePodRelabel(context.Background(), relabel(pod, map[string]string{"app": "debug", "tier": "db"}))
	if resp.Allowed || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "releases it from its StatefulSet") ||
		!strings.Contains(resp.Result.Message, "freeze") {
		t.Errorf("the relabel that releases db-0 in the Deny window: %+v, want 403 naming the release and the window", resp.Result)
	}
	if resp := h.HandlePodRelabel(context.Background(), relabel(pod, map[string]string{"app": "db", "tier": "db", "debug": "true",
		appsv1.ControllerRevisionHashLabelKey: "db-a"})); !resp.Allowed {
		t.Errorf("a relabel that keeps db-0 selected: %+v, want admitted", resp.Result)
	}
	// The revision label kube counts a template's pods by, forged to the staged revision:
	// db-0 would count as v2's, and the next DELETE would start v2 as "nothing".
	forged := map[string]string{"app": "db", "tier": "db", appsv1.ControllerRevisionHashLabelKey: "db-b"}
	if resp := h.HandlePodRelabel(context.Background(), relabel(pod, forged)); resp.Allowed || resp.Result.Code != http.StatusForbidden ||
		!strings.Contains(resp.Result.Message, "changes the revision its labels name") {
		t.Errorf("a forged controller-revision-hash: %+v, want 403", resp.Result)
	}
	// The controller reference changed instead of the labels: kube leaves a pod another
	// controller owns and replaces it; one left without a controller and still selected is
	// adopted again, which replaces nothing.
	owned := func(mut func(*corev1.Pod)) admission.Request {
		obj := pod.DeepCopy()
		mut(obj)
		o, _ := json.Marshal(obj)
		req := relabel(pod, pod.Labels)
		req.Object.Raw = o
		return req
	}
	if resp := h.HandlePodRelabel(context.Background(), owned(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "another" })); resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Errorf("a controller reference to another UID: %+v, want 403", resp.Result)
	}
	if resp := h.HandlePodRelabel(context.Background(), owned(func(p *corev1.Pod) { p.OwnerReferences = nil })); !resp.Allowed {
		t.Errorf("a controller reference removed, the labels still selected: %+v, want admitted (kube adopts it again)", resp.Result)
	}
	other := pod.DeepCopy()
	other.OwnerReferences[0].Kind = "ReplicaSet"
	if resp := h.HandlePodRelabel(context.Background(), relabel(other, nil)); !resp.Allowed {
		t.Errorf("a ReplicaSet's pod: %+v, want admitted", resp.Result)
	}
	stranger := pod.DeepCopy()
	stranger.OwnerReferences[0].Name = "gone"
	if resp := h.HandlePodRelabel(context.Background(), relabel(stranger, nil)); !resp.Allowed {
		t.Errorf("a pod of a StatefulSet the cache does not have: %+v, want admitted", resp.Result)
	}
	// A pod the StatefulSet released earlier (relabelled while nothing was staged) keeps
	// db-0's name: its DELETE is what lets kube create db-0 from the staged template.
	released := pod.DeepCopy()
	released.OwnerReferences, released.Labels = nil, map[string]string{"app": "debug"}
	if vs, starts, err := h.Replacement(context.Background(), released, ns.Labels, authenticationv1.UserInfo{Username: "alice"}); err != nil || !starts || vs.Action() != decision.Deny {
		t.Errorf("the DELETE of a released pod named as db-0, in the Deny window: starts=%v %v %v, want the window's refusal", starts, vs, err)
	}
	stray := released.DeepCopy()
	stray.Name = "db-7" // beyond the replicas: kube creates no db-7
	if vs, starts, err := h.Replacement(context.Background(), stray, ns.Labels, authenticationv1.UserInfo{Username: "alice"}); err != nil || starts || len(vs) != 0 {
		t.Errorf("the DELETE of a pod named as an ordinal beyond the replicas: starts=%v %v %v, want nothing started", starts, vs, err)
	}
	bad := relabel(pod, nil)
	bad.Object.Raw = []byte("{")
	if resp := h.HandlePodRelabel(context.Background(), bad); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("a malformed pod: %+v, want 400", resp.Result)
	}
	notPod := relabel(pod, nil)
	notPod.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	if resp := h.HandlePodRelabel(context.Background(), notPod); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("a StatefulSet sent to the pod relabel webhook: %+v, want 400", resp.Result)
	}
}
