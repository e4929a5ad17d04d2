// Package kubemodel is a small model of how kube's Deployment (with its ReplicaSets),
// StatefulSet and DaemonSet controllers replace pods during a rollout, one action per
// step: enough to say which pods exist, on which template, at any moment of a virtual
// clock. The rollout guard's model tests and `holdfast simulate` both run it, so that what
// the tests prove and what the simulator shows come from the same controllers.
//
// It follows pkg/controller/deployment (rolling.go: scale the new ReplicaSet up within
// maxSurge, the old ones down within maxUnavailable, unhealthy old pods first),
// pkg/controller/statefulset (ordered, highest ordinal first, one pod at a time, each
// Ready before the next; partition; OnDelete) and pkg/controller/daemon (one pod per node,
// a node's old pod replaced while fewer than maxUnavailable are unavailable; OnDelete).
// Surge for DaemonSets and StatefulSet maxUnavailable above one are not modelled.
package kubemodel

import (
	"slices"
	"sort"
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
	// partition the current revision, otherwise the update revision). The rollout model
	// tests set it: under kube's rule a held StatefulSet (OnDelete, or a partition at the
	// replicas) still starts its new template on the ordinals it creates, a gap the rollout
	// guard does not close yet (docs/invariants.md, "Known gaps").
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

	Pods []*Pod[T]
	// Ready reports whether a pod is Ready now.
	Ready func(*Pod[T]) bool
	// NewPod makes a pod of template t in slot; the caller decides when it becomes Ready.
	NewPod func(t T, slot int) *Pod[T]
}

// Step takes the controller's next action, if any, and reports whether it took one.
func (w *Workload[T]) Step() bool {
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

func (w *Workload[T]) stepDeployment() bool {
	if w.Paused {
		return w.stepPaused()
	}
	var fresh, old []*Pod[T]
	active := 0
	for _, p := range w.Pods {
		switch {
		case p.Terminating:
		case p.Template == w.Template:
			fresh, active = append(fresh, p), active+1
		default:
			old, active = append(old, p), active+1
		}
	}
	if len(fresh) < w.Replicas && active < w.Replicas+w.MaxSurge {
		w.Pods = append(w.Pods, w.NewPod(w.Template, -1))
		return true
	}
	if len(fresh) > w.Replicas {
		// The ReplicaSet scales down the pods that serve least first: not Ready before Ready.
		victim := fresh[0]
		for _, p := range fresh {
			if !w.Ready(p) {
				victim = p
				break
			}
		}
		w.delete(victim)
		return true
	}
	if len(old) == 0 {
		return false
	}
	all := w.Available()
	sort.SliceStable(old, func(i, j int) bool { return !w.Ready(old[i]) && w.Ready(old[j]) })
	victim := old[0]
	after := all
	if w.Ready(victim) {
		after--
	}
	if after >= w.Replicas-w.MaxUnavailable || !w.Ready(victim) {
		w.delete(victim)
		return true
	}
	return false
}

// stepPaused is a paused Deployment: no move to a new template, but its ReplicaSets keep
// their pods, so a pod evicted is replaced on the template most pods run.
func (w *Workload[T]) stepPaused() bool {
	count := map[T]int{}
	active := 0
	var top T
	for _, p := range w.Pods {
		if p.Terminating {
			continue
		}
		active++
		if count[p.Template]++; count[p.Template] > count[top] {
			top = p.Template
		}
	}
	if active == 0 {
		top = w.Template
	}
	if active < w.Replicas {
		w.Pods = append(w.Pods, w.NewPod(top, -1))
		return true
	}
	return false
}

// BySlot is the pods by slot.
func (w *Workload[T]) BySlot() map[int]*Pod[T] {
	out := map[int]*Pod[T]{}
	for _, p := range w.Pods {
		out[p.Slot] = p
	}
	return out
}

func (w *Workload[T]) stepStatefulSet() bool {
	if !w.HasCurrent {
		w.Current, w.HasCurrent = w.Template, true
	}
	if w.allOn(w.Template) {
		w.Current = w.Template // status.currentRevision catches up once every pod is updated
	}
	slots := w.BySlot()
	for i := range w.Replicas {
		if slots[i] == nil {
			// As newVersionedStatefulSetPod: below a RollingUpdate's partition on the
			// current revision, otherwise (OnDelete included) on the update revision.
			t := w.Template
			switch {
			case w.OldTemplateOnCreate && (i < w.Partition || w.OnDelete):
				t = w.lastFull(i)
			case !w.OldTemplateOnCreate && !w.OnDelete && i < w.Partition:
				t = w.Current
			}
			w.Pods = append(w.Pods, w.NewPod(t, i))
			return true
		}
		if p := slots[i]; w.OrderedReady && (p.Terminating || !w.Ready(p)) {
			break // each ordinal Ready before the next is created
		}
	}
	for _, p := range slices.Clone(w.Pods) {
		if p.Slot >= w.Replicas && !p.Terminating {
			w.delete(p)
			return true
		}
	}
	if w.OnDelete {
		return false
	}
	for _, p := range w.Pods {
		if p.Terminating || !w.Ready(p) {
			return false // one at a time, each Ready before the next
		}
	}
	for i := w.Replicas - 1; i >= w.Partition; i-- {
		if p := slots[i]; p.Template != w.Template {
			w.delete(p)
			if !w.Graceful {
				w.Pods = append(w.Pods, w.NewPod(w.Template, i))
			}
			return true
		}
	}
	return false
}

// lastFull is a template another pod runs.
func (w *Workload[T]) lastFull(slot int) T {
	for _, p := range w.Pods {
		if p.Slot != slot {
			return p.Template
		}
	}
	return w.Template
}

// allOn is every pod, as many as the replicas, on template t.
func (w *Workload[T]) allOn(t T) bool {
	n := 0
	for _, p := range w.Pods {
		if p.Template != t {
			return false
		}
		n++
	}
	return n == w.Replicas
}

func (w *Workload[T]) stepDaemonSet() bool {
	slots := w.BySlot()
	for _, i := range w.Nodes {
		if slots[i] == nil {
			w.Pods = append(w.Pods, w.NewPod(w.Template, i))
			return true
		}
	}
	for _, p := range w.Pods {
		if !p.Terminating && !slices.Contains(w.Nodes, p.Slot) {
			w.delete(p) // a node the DaemonSet no longer selects
			return true
		}
	}
	if w.OnDelete {
		return false
	}
	unavailable := 0
	for _, p := range w.Pods {
		if !w.Ready(p) {
			unavailable++
		}
	}
	budget := max(w.MaxUnavailable, 1)
	for _, p := range w.Pods {
		if p.Template != w.Template && !p.Terminating && (!w.Ready(p) || unavailable < budget) {
			w.delete(p)
			if !w.Graceful {
				w.Pods = append(w.Pods, w.NewPod(w.Template, p.Slot))
			}
			return true
		}
	}
	return false
}
