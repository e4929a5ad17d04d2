// Package workload gives the apps/v1 workload kinds holdfast guards one shape,
// so that policy decisions are written once for Deployments, StatefulSets and DaemonSets.
package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Workload is the part of a Deployment, StatefulSet or DaemonSet that decisions read.
type Workload struct {
	Kind      v1alpha1.WorkloadKind
	Namespace string
	Name      string
	Labels    map[string]string
	// Replicas is spec.replicas; nil for DaemonSets, which have none.
	Replicas *int32
	Template *corev1.PodTemplateSpec
}

// From views a typed apps/v1 workload as a Workload. The result shares memory with obj.
func From(obj runtime.Object) (*Workload, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &Workload{Kind: v1alpha1.KindDeployment, Namespace: o.Namespace, Name: o.Name, Labels: o.Labels,
			Replicas: o.Spec.Replicas, Template: &o.Spec.Template}, nil
	case *appsv1.StatefulSet:
		return &Workload{Kind: v1alpha1.KindStatefulSet, Namespace: o.Namespace, Name: o.Name, Labels: o.Labels,
			Replicas: o.Spec.Replicas, Template: &o.Spec.Template}, nil
	case *appsv1.DaemonSet:
		return &Workload{Kind: v1alpha1.KindDaemonSet, Namespace: o.Namespace, Name: o.Name, Labels: o.Labels,
			Template: &o.Spec.Template}, nil
	default:
		return nil, fmt.Errorf("unsupported workload type %T: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", obj)
	}
}

// New returns an empty typed object for a workload kind, ready to decode into.
func New(kind string) (runtime.Object, error) {
	switch v1alpha1.WorkloadKind(kind) {
	case v1alpha1.KindDeployment:
		return &appsv1.Deployment{}, nil
	case v1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{}, nil
	case v1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{}, nil
	default:
		return nil, fmt.Errorf("unsupported kind %q: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", kind)
	}
}

// String names the workload as kind namespace/name, for messages.
func (w *Workload) String() string {
	return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
}
