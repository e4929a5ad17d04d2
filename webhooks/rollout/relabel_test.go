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
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// TestPodRelabelThatReleasesIsJudgedAsAReplacement: an OnDelete StatefulSet's edit to v2
// is staged (every pod runs v1) and a Deny window is open. Relabelling db-0 out of the
// selector makes kube's controller release it and create db-0 again from v2 once the
// released pod is gone (a DaemonSet's at once): v2's first pod, with no eviction or DELETE
// of a pod the StatefulSet controls. The relabel is refused as that eviction would be. A
// relabel that keeps the pod selected, a pod of another owner and a workload the cache
// does not have are admitted; what is not a pod UPDATE is a 400.
func TestPodRelabelThatReleasesIsJudgedAsAReplacement(t *testing.T) {
	sc := newDBScene()
	t0, ns, reader, sts := sc.t0, sc.ns, sc.reader, sc.sts
	// v2 staged: the StatefulSet's template, which no pod runs.
	sts.Generation, sts.Spec.Template = 2, sc.tmpl("v2")
	sts.Status.ObservedGeneration, sts.Status.UpdatedReplicas, sts.Status.UpdateRevision = 2, 0, "db-b"
	reader.Put(sc.revision("a", "v1", 1, t0.Add(-3*time.Hour)))
	pod := sc.pod(0)
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
	if vs, starts, err := h.Replacement(context.Background(), budget.Deadline{}, released, ns.Labels, authenticationv1.UserInfo{Username: "alice"}); err != nil || !starts || vs.Action() != decision.Deny {
		t.Errorf("the DELETE of a released pod named as db-0, in the Deny window: starts=%v %v %v, want the window's refusal", starts, vs, err)
	}
	stray := released.DeepCopy()
	stray.Name = "db-7" // beyond the replicas: kube creates no db-7
	if vs, starts, err := h.Replacement(context.Background(), budget.Deadline{}, stray, ns.Labels, authenticationv1.UserInfo{Username: "alice"}); err != nil || starts || len(vs) != 0 {
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
