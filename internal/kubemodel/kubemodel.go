// Package kubemodel is a small model of how kube's Deployment (with its ReplicaSets),
// StatefulSet and DaemonSet controllers replace pods during a rollout, one action per
// step: enough to say which pods exist, on which template, at any moment of a virtual
// clock. The rollout guard's model tests and `holdfast simulate` both run it, so that what
// the tests prove and what the simulator shows come from the same controllers.
//
// It follows kube 1.37's pkg/controller: deployment (ReplicaSets sized by rolling.go,
// recreate.go and sync.go's proportional scaling, their pods by the ReplicaSet
// controller), statefulset (stateful_set_control.go: OrderedReady and Parallel,
// partition, maxUnavailable, OnDelete, the current revision) and daemon (manage and
// update.go's rollingUpdate without surge; OnDelete). Each function names the kube
// function it follows. Surge for DaemonSets, minReadySeconds apart from what Ready
// reports, and progress deadlines are not modelled. e2e/replay_test.go holds the model
// to kube's controllers on the kwok test bed.
package kubemodel

import (
	"slices"
	"time"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Pod is one pod of a modelled workload, on template T.
type Pod[T comparable] struct {
	Template T
	// Slot is the StatefulSet ordinal or the DaemonSet's node; -1 for a Deployment's pod.
	Slot    int
	Created time.Time
	// ReadyAt is when the pod becomes Ready; zero: never.
	ReadyAt time.Time
	// Terminating is a pod being deleted (evicted): a Deployment's ReplicaSet replaces it
	// at once; a StatefulSet ordinal or a DaemonSet node is taken until it is gone.
	Terminating bool
}

// Workload is a workload's spec as its controller reads it, and its pods.
type Workload[T comparable] struct {
	Kind     v1alpha1.WorkloadKind
	Template T
	// Replicas of a Deployment or StatefulSet.
	Replicas int
	// Nodes are the DaemonSet's nodes, by slot.
	Nodes    []int
	Paused   bool // a Deployment's spec.paused
	OnDelete bool // a StatefulSet's or DaemonSet's OnDelete strategy
	// Partition of a StatefulSet's RollingUpdate.
	Partition int
	// Current is a StatefulSet's current revision (status.currentRevision): the template
	// its pods below the partition are recreated on. It becomes Template once every pod
	// runs Template; the zero value is Template.
	Current    T
	HasCurrent bool
	// OldTemplateOnCreate creates a missing StatefulSet ordinal on a template its other
	// pods run whatever the strategy, instead of kube's rule (below a RollingUpdate's
	// partition the current revision, otherwise the update revision). Only the replay's
	// self-test sets it: under kube's rule a held StatefulSet (OnDelete, or a partition at
	// the replicas) still starts its new template on the ordinals it creates, which the
	// rollout guard judges as a start when a request makes them (a scale up, a CREATE) and
	// names as a known gap when a side door does (docs/invariants.md, "Known gaps").
	OldTemplateOnCreate bool
	// MaxUnavailable and MaxSurge as resolved against the replicas (a DaemonSet's and
	// StatefulSet's maxUnavailable is at least one).
	MaxUnavailable, MaxSurge int
	// Graceful deletes a pod by marking it Terminating (the caller removes it once it is
	// gone): a StatefulSet ordinal or a DaemonSet node waits for it. Unset, a deleted pod
	// is gone at once.
	Graceful bool
	// OrderedReady creates a StatefulSet's missing ordinals one at a time, each once every
	// lower one is Ready and none is terminating (podManagementPolicy OrderedReady).
	OrderedReady bool
	// Recreate is a Deployment's Recreate strategy: every old pod gone before the new
	// template's first is created.
	Recreate bool

	// Revisions numbers the templates as kube's revisions do (a Deployment's ReplicaSets,
	// a StatefulSet's or DaemonSet's ControllerRevisions): the first template is 1, each
	// move to a template that is not the latest takes the next number, a return to an
	// earlier template renumbers it. Step keeps it; nil starts it.
	Revisions map[T]int64
	// Sets are a Deployment's ReplicaSets, one per template, as the Deployment controller
	// sizes them; nil, Step derives them from the pods (one per template, as many
	// replicas as it has pods not terminating).
	Sets []*ReplicaSet[T]

	Pods []*Pod[T]
	// Ready reports whether a pod is Ready now.
	Ready func(*Pod[T]) bool
	// NewPod makes a pod of template t in slot; the caller decides when it becomes Ready.
	NewPod func(t T, slot int) *Pod[T]
}

// Step takes the controller's next action, if any, and reports whether it took one.
func (w *Workload[T]) Step() bool {
	w.revise()
	switch w.Kind {
	case v1alpha1.KindDeployment:
		return w.stepDeployment()
	case v1alpha1.KindStatefulSet:
		return w.stepStatefulSet()
	default:
		return w.stepDaemonSet()
	}
}

// Settle takes actions until the controller has none left to take now, at most limit.
func (w *Workload[T]) Settle(limit int) int {
	n := 0
	for n < limit && w.Step() {
		n++
	}
	return n
}

// Wanted is how many pods the controller wants: the replicas, or one per DaemonSet node.
func (w *Workload[T]) Wanted() int {
	if w.Kind == v1alpha1.KindDaemonSet {
		return len(w.Nodes)
	}
	return w.Replicas
}

// Available counts the Ready pods that are not terminating.
func (w *Workload[T]) Available() int {
	n := 0
	for _, p := range w.Pods {
		if !p.Terminating && w.Ready(p) {
			n++
		}
	}
	return n
}

// Remove deletes p at once.
func (w *Workload[T]) Remove(p *Pod[T]) {
	w.Pods = slices.DeleteFunc(w.Pods, func(q *Pod[T]) bool { return q == p })
}

// delete is the controller deleting p: at once, or Terminating when Graceful.
func (w *Workload[T]) delete(p *Pod[T]) {
	if w.Graceful {
		p.Terminating = true
		return
	}
	w.Remove(p)
}

// BySlot is the pods by slot.
func (w *Workload[T]) BySlot() map[int]*Pod[T] {
	out := map[int]*Pod[T]{}
	for _, p := range w.Pods {
		out[p.Slot] = p
	}
	return out
}

// revise numbers the template as kube's controllers do when they first see it: the
// Deployment controller's getNewReplicaSet (deployment/sync.go: the new ReplicaSet's
// revision is the old ones' highest plus one, an existing one's raised to it),
// getStatefulSetRevisions (statefulset/stateful_set_control.go) and the DaemonSet
// controller's constructHistory (daemon/update.go): an equal revision that is not the
// latest is renumbered to the next one. A paused Deployment makes no new ReplicaSet.
func (w *Workload[T]) revise() {
	if w.Kind == v1alpha1.KindDeployment && w.Paused {
		return
	}
	if w.Revisions == nil {
		w.Revisions = map[T]int64{}
	}
	var top int64
	for _, r := range w.Revisions {
		top = max(top, r)
	}
	if r, ok := w.Revisions[w.Template]; !ok || r < top {
		w.Revisions[w.Template] = top + 1
	}
}
