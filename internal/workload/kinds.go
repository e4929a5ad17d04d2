package workload

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Kinds are the workload kinds holdfast guards.
func Kinds() []v1alpha1.WorkloadKind {
	return []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet}
}

// Resource is the kind's apps/v1 resource, e.g. deployments.
func Resource(kind v1alpha1.WorkloadKind) string {
	return strings.ToLower(string(kind)) + "s"
}

// KindOfResource is the guarded kind an apps/v1 resource holds, and whether there is one.
func KindOfResource(resource string) (v1alpha1.WorkloadKind, bool) {
	for _, k := range Kinds() {
		if Resource(k) == resource {
			return k, true
		}
	}
	return "", false
}

// New returns an empty typed object of a guarded kind, ready to decode or read into.
func New(kind v1alpha1.WorkloadKind) (client.Object, error) {
	switch kind {
	case v1alpha1.KindDeployment:
		return &appsv1.Deployment{}, nil
	case v1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{}, nil
	case v1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{}, nil
	}
	return nil, unsupported(kind)
}

// NewList returns an empty list of a guarded kind.
func NewList(kind v1alpha1.WorkloadKind) (client.ObjectList, error) {
	switch kind {
	case v1alpha1.KindDeployment:
		return &appsv1.DeploymentList{}, nil
	case v1alpha1.KindStatefulSet:
		return &appsv1.StatefulSetList{}, nil
	case v1alpha1.KindDaemonSet:
		return &appsv1.DaemonSetList{}, nil
	}
	return nil, unsupported(kind)
}

func unsupported(kind v1alpha1.WorkloadKind) error {
	return fmt.Errorf("unsupported kind %q: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", kind)
}

// expected is how many pods a workload of the kind expects: spec.replicas (1 when unset,
// as the API server defaults it), or a DaemonSet's desiredNumberScheduled.
func expected(kind v1alpha1.WorkloadKind, replicas *int32, desiredNumberScheduled int32) int32 {
	if kind == v1alpha1.KindDaemonSet {
		return desiredNumberScheduled
	}
	return ptr.Deref(replicas, 1)
}

// Ref names a workload.
type Ref struct {
	Kind      v1alpha1.WorkloadKind
	Namespace string
	Name      string
	// UID identifies the workload as the owner of its ReplicaSets, ControllerRevisions and pods.
	UID types.UID
}

// String names the workload as kind namespace/name, for messages.
func (r Ref) String() string {
	return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
}

// Meta is what is read of a typed workload without its pod template's spec: which it is,
// which pods it selects and how many it expects. The PDB generator and the eviction guard
// read workloads this way.
type Meta struct {
	Ref
	Selector *metav1.LabelSelector
	// PodLabels are the pod template's labels, which DisruptionPolicies select; Labels the
	// workload's own, which RolloutPolicies select.
	PodLabels, Labels map[string]string
	// Expected is spec.replicas, or a DaemonSet's desiredNumberScheduled.
	Expected int32
}

// MetaOf reads a typed workload; ok is false for other kinds. The selector and labels are
// the object's own.
func MetaOf(obj any) (m Meta, ok bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return meta(v1alpha1.KindDeployment, &o.ObjectMeta, o.Spec.Selector, o.Spec.Template.Labels, expected(v1alpha1.KindDeployment, o.Spec.Replicas, 0)), true
	case *appsv1.StatefulSet:
		return meta(v1alpha1.KindStatefulSet, &o.ObjectMeta, o.Spec.Selector, o.Spec.Template.Labels, expected(v1alpha1.KindStatefulSet, o.Spec.Replicas, 0)), true
	case *appsv1.DaemonSet:
		return meta(v1alpha1.KindDaemonSet, &o.ObjectMeta, o.Spec.Selector, o.Spec.Template.Labels, expected(v1alpha1.KindDaemonSet, nil, o.Status.DesiredNumberScheduled)), true
	}
	return Meta{}, false
}

func meta(kind v1alpha1.WorkloadKind, m *metav1.ObjectMeta, sel *metav1.LabelSelector, podLabels map[string]string, expected int32) Meta {
	return Meta{Ref: Ref{Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}, Selector: sel, PodLabels: podLabels, Labels: m.Labels, Expected: expected}
}
