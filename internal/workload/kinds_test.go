package workload

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

func TestParseRefReadsString(t *testing.T) {
	r := Ref{Kind: v1alpha1.KindStatefulSet, Namespace: "cp", Name: "etcd"}
	if got, ok := ParseRef(r.String()); !ok || got != r {
		t.Errorf("ParseRef(%q) = %+v, %t; want %+v", r.String(), got, ok, r)
	}
	for _, s := range []string{"", "Deployment", "Deployment cp", "Deployment/cp etcd"} {
		if _, ok := ParseRef(s); ok {
			t.Errorf("ParseRef(%q) is ok, want not a ref", s)
		}
	}
}

func TestTypedFieldsOfEveryKind(t *testing.T) {
	for _, k := range Kinds() {
		obj, _ := New(k)
		PodTemplate(obj).Labels = map[string]string{"app": "a"}
		if m, _ := MetaOf(obj); m.PodLabels["app"] != "a" {
			t.Errorf("%s: PodTemplate is not the object's template", k)
		}
		if got := SetReplicas(obj, 3); got != Scalable(k) {
			t.Errorf("%s: SetReplicas = %t, want %t (Scalable)", k, got, Scalable(k))
		}
		if m, _ := MetaOf(obj); Scalable(k) && m.Expected != 3 {
			t.Errorf("%s: expects %d pods after SetReplicas(3)", k, m.Expected)
		}
	}
	if PodTemplate(&corev1.Pod{}) != nil || SetReplicas(&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1)}}, 2) {
		t.Error("other kinds have no workload fields")
	}
	if got := Targeted(v1alpha1.WorkloadTargets{}); !slices.Equal(got, Kinds()) {
		t.Errorf("targets naming no kind target %v, want all", got)
	}
	if got := Targeted(v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet}}); !slices.Equal(got, []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet}) {
		t.Errorf("Targeted = %v, want the kinds named", got)
	}
}
