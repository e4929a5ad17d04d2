package history

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func tmpl(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func controller(uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{UID: uid, Controller: ptr.To(true), Name: "owner"}}
}

func TestFromReplicaSets(t *testing.T) {
	rs := func(name, revision string, owner types.UID, created time.Duration, available int32) appsv1.ReplicaSet {
		return appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: controller(owner),
				Annotations:       map[string]string{"deployment.kubernetes.io/revision": revision},
				CreationTimestamp: metav1.NewTime(t0.Add(created))},
			Spec:   appsv1.ReplicaSetSpec{Template: tmpl(name)},
			Status: appsv1.ReplicaSetStatus{AvailableReplicas: available, Replicas: available, TerminatingReplicas: ptr.To[int32](1)},
		}
	}
	// Rolled back: a's revision was renumbered 3 after b's 2.
	got := FromReplicaSets("d", []appsv1.ReplicaSet{
		rs("a", "3", "d", 0, 2), rs("b", "2", "d", time.Minute, 1), rs("other", "1", "x", 0, 5),
	})
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"b", "a"}, names); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
	h := History{Revisions: got}
	a := tmpl("a")
	if r := h.Find(workload.FromSpec(&a, "")); r == nil || r.Serving != 2 || h.Newest() != r || h.Successor(r) != nil {
		t.Errorf("Find(a) = %+v; want the newest revision, serving 2", r)
	}
	if r := h.Find(workload.FromSpec(&a, "")); r == nil || r.Live != 3 {
		t.Errorf("Find(a) = %+v; want 3 live pods: 2 replicas and 1 terminating", r)
	}
	if s := h.Successor(&got[0]); s == nil || s.Name != "a" {
		t.Errorf("Successor(b) = %+v, want a", s)
	}
}

func TestFromControllerRevisions(t *testing.T) {
	cr := func(name string, n int64, image string) appsv1.ControllerRevision {
		tp := tmpl(image)
		raw := []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"` + tp.Spec.Containers[0].Image + `"}]}}}}`)
		return appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: controller("s")},
			Revision: n, Data: runtime.RawExtension{Raw: raw}}
	}
	pod := func(hash string, ready bool) corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: hash}, CreationTimestamp: metav1.NewTime(t0)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}}},
		}
	}
	// StatefulSet pods carry the revision's full name; DaemonSet pods only its hash. A
	// terminating pod is live but not counted in Pods; an ended one is not live. Kept
	// counts neither.
	terminating, ended := pod("web-1", true), pod("2", false)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	ended.Status.Phase = corev1.PodSucceeded
	pods := []corev1.Pod{pod("web-1", true), pod("2", true), pod("2", false), terminating, ended}
	got, err := FromControllerRevisions("s", "web", []appsv1.ControllerRevision{cr("web-2", 2, "y"), cr("web-1", 1, "x")}, pods, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "web-1" || got[0].Serving != 1 || got[1].Serving != 1 {
		t.Fatalf("revisions = %+v", got)
	}
	if got[0].Pods != 1 || got[0].Live != 2 || got[1].Pods != 3 || got[1].Live != 2 {
		t.Errorf("web-1 has %d pods, %d live; web-2 %d pods, %d live: want 1 and 2 (one terminating), 3 and 2 (one ended)",
			got[0].Pods, got[0].Live, got[1].Pods, got[1].Live)
	}
	if got[0].Kept != 1 || got[1].Kept != 2 {
		t.Errorf("web-1 keeps %d pods, web-2 %d: want 1 (one terminating) and 2 (one ended)", got[0].Kept, got[1].Kept)
	}
	y := tmpl("y")
	if spec, err := got[1].Template.Spec(); err != nil || !workload.SameSpec(spec, &y) {
		t.Errorf("template of web-2 = %+v, want image y", got[1].Template)
	}
	if last := workload.LastActivity(pods); !last.Equal(t0.Add(time.Minute)) {
		t.Errorf("LastActivity = %v, want the Ready transition", last)
	}

	bad := cr("web-3", 3, "z")
	bad.Data.Raw = []byte(`{"spec":{}}`)
	if _, err := FromControllerRevisions("s", "web", []appsv1.ControllerRevision{bad}, nil, nil); err == nil {
		t.Error("a ControllerRevision without a template must be an error")
	}
}

// TestSlimRevisionsStayComparable checks what the cache relies on when it drops revision
// templates: a slimmed ReplicaSet or ControllerRevision is still found by a typed
// template, and by the JSON the API server sends, and a different template is not.
func TestSlimRevisionsStayComparable(t *testing.T) {
	a, b := tmpl("a"), tmpl("b")
	rs := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs-a", UID: "rs", Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"},
		OwnerReferences: []metav1.OwnerReference{{UID: "owner", Controller: ptr.To(true)}}}}
	rs.Spec.Template = *a.DeepCopy()
	rs.Spec.Template.Labels = map[string]string{"app": "a", appsv1.DefaultDeploymentUniqueLabelKey: "h"}
	// Twice, as an informer's initial list streamed as a watch passes each object through
	// the transform twice: the second pass keeps the template's fingerprint.
	for range 2 {
		if _, err := Slim(&rs); err != nil {
			t.Fatal(err)
		}
	}
	if rs.Spec.Template.Spec.Containers != nil || rs.Annotations[workload.FingerprintAnnotation] == "" {
		t.Fatalf("Slim kept the template or set no fingerprint: %+v", rs)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	h := History{Revisions: FromReplicaSets("owner", []appsv1.ReplicaSet{rs})}
	for what, tt := range map[string]*workload.Template{"typed": workload.FromSpec(&a, ""), "JSON": workload.FromJSON(raw)} {
		if h.Find(tt) == nil {
			t.Errorf("the slimmed revision is not found by the %s template", what)
		}
	}
	if h.Find(workload.FromSpec(&b, "")) != nil {
		t.Error("a different template matched the slimmed revision")
	}

	cr := appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Annotations: map[string]string{},
		OwnerReferences: []metav1.OwnerReference{{UID: "owner", Controller: ptr.To(true)}}}, Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":` + string(raw) + `}}`)}}
	for range 2 {
		if _, err := Slim(&cr); err != nil {
			t.Fatal(err)
		}
	}
	revs, err := FromControllerRevisions("owner", "web", []appsv1.ControllerRevision{cr}, nil, nil)
	if err != nil || len(cr.Data.Raw) != 0 {
		t.Fatalf("slimmed ControllerRevision: data %q, %v", cr.Data.Raw, err)
	}
	if (History{Revisions: revs}).Find(workload.FromJSON(raw)) == nil {
		t.Error("the slimmed ControllerRevision is not found by its template's JSON")
	}
}

// TestAForgedFingerprintIsNotRead: a ReplicaSet or ControllerRevision read with its
// template (from the API server, not the cache) is known by that template, whatever
// fingerprint annotation it carries: anyone who may edit it may write one, and the
// Deployment controller copies a Deployment's annotations to its ReplicaSets.
func TestAForgedFingerprintIsNotRead(t *testing.T) {
	a, b := tmpl("a"), tmpl("b")
	forged, ok := workload.FromSpec(&b, "").Sum()
	if !ok {
		t.Fatal("no fingerprint for b")
	}
	rs := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs-a", UID: "rs",
		Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1", workload.FingerprintAnnotation: forged},
		OwnerReferences: []metav1.OwnerReference{{UID: "owner", Controller: ptr.To(true)}}}}
	rs.Spec.Template = *a.DeepCopy()
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	cr := appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Annotations: map[string]string{workload.FingerprintAnnotation: forged},
		OwnerReferences: []metav1.OwnerReference{{UID: "owner", Controller: ptr.To(true)}}}, Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":` + string(raw) + `}}`)}}
	revs, err := FromControllerRevisions("owner", "web", []appsv1.ControllerRevision{cr}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sumA, _ := workload.FromSpec(&a, "").Sum()
	for what, h := range map[string]History{"ReplicaSet": {Revisions: FromReplicaSets("owner", []appsv1.ReplicaSet{rs})}, "ControllerRevision": {Revisions: revs}} {
		// Compared with templates known by their fingerprints, as a journal's revisions are.
		if h.Find(workload.FromFingerprint(forged)) != nil {
			t.Errorf("the %s of template a is read as the template its forged fingerprint names", what)
		}
		if h.Find(workload.FromFingerprint(sumA)) == nil {
			t.Errorf("the %s of template a is not found by template a's fingerprint", what)
		}
	}
	// A revision whose data holds no template is not known by the annotation it carries:
	// reading it is an error, as without one.
	bad := cr.DeepCopy()
	bad.Data.Raw = []byte(`{"spec":{}}`)
	if _, err := Slim(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := FromControllerRevisions("owner", "web", []appsv1.ControllerRevision{*bad}, nil, nil); err == nil || bad.Annotations[workload.FingerprintAnnotation] != "" {
		t.Errorf("a revision without a template, with a forged fingerprint: read without error (%v), annotation %q", err, bad.Annotations[workload.FingerprintAnnotation])
	}
	// Through the cache's transform, the forged annotation is replaced by the template's.
	if _, err := Slim(&rs); err != nil {
		t.Fatal(err)
	}
	if h := (History{Revisions: FromReplicaSets("owner", []appsv1.ReplicaSet{rs})}); h.Find(workload.FromSpec(&a, "")) == nil || h.Find(workload.FromSpec(&b, "")) != nil {
		t.Error("the slimmed ReplicaSet is not known by its own template's fingerprint")
	}
}
