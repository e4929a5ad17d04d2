// Package workload gives the apps/v1 workload kinds holdfast guards one shape,
// so that policy decisions are written once for Deployments, StatefulSets and DaemonSets.
package workload

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/internal/apijson"
)

// Workload is the part of a Deployment, StatefulSet or DaemonSet that rollout decisions
// read, with its pod template.
type Workload struct {
	Ref
	Labels map[string]string
	// Generation is metadata.generation: which spec the object is.
	Generation int64
	// Replicas is spec.replicas; nil for DaemonSets, which have none.
	Replicas *int32
	// OrdinalStart is a StatefulSet's spec.ordinals.start: its pods are numbered from it
	// (kube's getStartOrdinal), so a change makes new ordinals.
	OrdinalStart int32
	// Expected is how many pods the workload expects, what percentages resolve against:
	// spec.replicas, or a DaemonSet's desiredNumberScheduled.
	Expected int32
	Template *Template
	// Rollout is the state of the rollout, read from the object's status.
	Rollout Rollout
	// Strategy is how the workload replaces its pods.
	Strategy Strategy

	// selector is spec.selector, typed or as JSON (Selector).
	selector     *metav1.LabelSelector
	selectorJSON rawJSON
}

// Selector is spec.selector: what the workload's controller adopts (kube claims the
// ReplicaSets, ControllerRevisions and pods it matches, whatever their other labels). nil
// when the object has none, which the API server refuses.
func (w *Workload) Selector() (*metav1.LabelSelector, error) {
	if w.selector != nil || len(w.selectorJSON) == 0 || string(w.selectorJSON) == "null" {
		return w.selector, nil
	}
	sel := &metav1.LabelSelector{}
	if err := apijson.Unmarshal(w.selectorJSON, sel); err != nil {
		return nil, fmt.Errorf("%s: spec.selector: %w", w, err)
	}
	w.selector = sel
	return sel, nil
}

// Strategy is the update strategy of a workload, in one shape for all kinds.
type Strategy struct {
	// Rolling is false for Recreate Deployments and OnDelete StatefulSets and DaemonSets.
	Rolling bool
	// MaxUnavailable and MaxSurge are as written, nil where unset or not supported
	// (StatefulSets have no maxSurge); the API server defaults them before admission.
	MaxUnavailable, MaxSurge *intstr.IntOrString
	MinReadySeconds          int32
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
	// ProgressDeadline is a Deployment's progressDeadlineSeconds: DeadlineExceeded says no
	// progress for that long, and a workload sets it itself.
	ProgressDeadline time.Duration
	// Mixed is a status that shows pods (a DaemonSet: scheduled nodes) not running the
	// template, or that is of an older generation and may: without it, no other revision
	// has pods left to roll back to.
	Mixed bool
	// Held is a spec under which the controller rolls no pod to a new template: a paused
	// Deployment, an OnDelete StatefulSet or DaemonSet, a StatefulSet whose partition is at
	// or above its replicas. A template changed while held is staged: its rollout starts
	// when the hold is lifted (resume, RollingUpdate, a lower partition).
	Held bool
	// CurrentIsUpdate is a StatefulSet whose status names one revision current and update:
	// kube creates every ordinal from its template then, below a partition too
	// (newVersionedStatefulSetPod).
	CurrentIsUpdate bool
	// CurrentRevision is a StatefulSet's status.currentRevision: the ControllerRevision
	// kube creates the ordinals below a partition from; "" when the status names none.
	CurrentRevision string
	// CurrentPods is a StatefulSet's status.currentReplicas: its pods of the current
	// revision, as its controller last counted them.
	CurrentPods int32
	// Fresh is a status its controller has never written (observedGeneration 0): a workload
	// created moments ago, which has not adopted yet what an orphaning delete of one of its
	// name left behind.
	Fresh bool
}

// From views a typed apps/v1 workload as a Workload, reading what decisions read into a
// Lean, as the lean path does from a review; its template is the typed one, or the one the
// cache packed (Pack).
func From(obj runtime.Object) (*Workload, error) {
	kind, l, t, err := leanOf(obj)
	if err != nil {
		return nil, err
	}
	if packed := packedTemplate(obj); packed != nil {
		return view(kind, l, packed)
	}
	return view(kind, l, FromSpec(t, ""))
}
