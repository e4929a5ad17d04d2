// Package workload gives the apps/v1 workload kinds holdfast guards one shape,
// so that policy decisions are written once for Deployments, StatefulSets and DaemonSets.
package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

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
	Template *Template
	// UID identifies the workload as the owner of its ReplicaSets, ControllerRevisions and pods.
	UID types.UID
	// Rollout is the state of the rollout, read from the object's status.
	Rollout Rollout
	// Strategy is how the workload replaces its pods.
	Strategy Strategy
}

// Strategy is the update strategy of a workload, in one shape for all kinds.
type Strategy struct {
	// Rolling is false for Recreate Deployments and OnDelete StatefulSets and DaemonSets.
	Rolling bool
	// MaxUnavailable and MaxSurge are as written, nil where unset or not supported
	// (StatefulSets have no maxSurge); the API server defaults them before admission.
	MaxUnavailable, MaxSurge *intstr.IntOrString
	MinReadySeconds          int32
	// Scale is what percentages resolve against: spec.replicas, or a DaemonSet's
	// desiredNumberScheduled.
	Scale int32
}

// Rollout is what the status of a workload says about its rollout.
type Rollout struct {
	// InProgress is true while the current revision is still rolling out: the
	// controller has not observed the latest spec, or not every replica is updated and
	// available (Deployments), not every replica below the partition is updated
	// (StatefulSets), or not every scheduled pod is updated and available (DaemonSets).
	InProgress bool
	// Progress describes the rollout for messages.
	Progress Progress
	// Paused is a paused Deployment: edits while paused roll nothing out.
	Paused bool
	// OnDelete is a StatefulSet or DaemonSet that only updates pods when they are deleted.
	OnDelete bool
	// DeadlineExceeded is a Deployment whose Progressing condition is False with
	// ProgressDeadlineExceeded: kube itself has declared the rollout stalled.
	DeadlineExceeded bool
}

// From views a typed apps/v1 workload as a Workload, reading what decisions read into a
// Lean, as the lean path does from a review; its template is the typed one.
func From(obj runtime.Object) (*Workload, error) {
	kind, l, t, err := leanOf(obj)
	if err != nil {
		return nil, err
	}
	return view(kind, l, FromSpec(t, ""))
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
