package kubemodel

import (
	"math"
	"slices"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// ReplicaSet is one of a Deployment's ReplicaSets: its template, spec.replicas, and the
// replicas annotations the Deployment controller writes on it
// (deployment.kubernetes.io/desired-replicas and max-replicas).
type ReplicaSet[T comparable] struct {
	Template T
	Replicas int
	// Desired and MaxReplicas are the annotations: the Deployment's replicas, and its
	// replicas plus maxSurge, when the controller last sized the set.
	Desired, MaxReplicas int
	// Created orders the sets by creation, as kube's creationTimestamp does.
	Created int
}

// stepDeployment is one sync of the Deployment controller (deployment_controller.go,
// syncDeployment: a scaling event is handled by sync, otherwise rolloutRecreate or
// rolloutRolling), and when it changes no ReplicaSet's size, one action of the ReplicaSet
// controller (replica_set.go, manageReplicas: a missing pod created, an excess pod
// deleted, not Ready before Ready as controller.ActivePods ranks them).
func (w *Workload[T]) stepDeployment() bool {
	if w.Sets == nil {
		w.deriveSets()
	}
	if w.Paused {
		// A paused Deployment is only scaled (deployment_controller.go, syncDeployment:
		// sync for a paused one): no ReplicaSet is created for a template edited while
		// paused, and each ReplicaSet keeps its pods, a deleted one replaced on its own
		// template by the ReplicaSet controller.
		before := w.sizes()
		if w.scalingEvent() {
			w.scale()
		}
		resized := !slices.Equal(before, w.sizes())
		return w.manageReplicas() || resized
	}
	before := w.sizes()
	switch {
	case w.scalingEvent():
		w.scale()
	case w.Recreate:
		w.rolloutRecreate()
	default:
		w.rolloutRolling()
	}
	resized := !slices.Equal(before, w.sizes())
	return w.manageReplicas() || resized
}

func (w *Workload[T]) sizes() []int {
	out := make([]int, 0, 2*len(w.Sets))
	for _, rs := range w.Sets {
		out = append(out, rs.Created, rs.Replicas)
	}
	return out
}

// DeriveSets gives a Deployment whose ReplicaSets are not known yet (Sets nil) one per
// template with pods, as Step would: a world that starts from pods calls it before
// anything deletes them, since kube's ReplicaSets outlive their pods (a ReplicaSet whose
// pods were all deleted before the controller's next sync replaces them).
func (w *Workload[T]) DeriveSets() {
	if w.Kind == v1alpha1.KindDeployment && w.Sets == nil {
		w.deriveSets()
	}
}

// deriveSets makes a set per template with pods, sized by its pods not terminating (the only
// one by the Deployment's replicas), in the order the pods were created, annotated as if
// the Deployment had always had its replicas.
func (w *Workload[T]) deriveSets() {
	for _, p := range w.Pods {
		rs := w.set(p.Template)
		if rs == nil {
			rs = &ReplicaSet[T]{Template: p.Template, Desired: w.Replicas, MaxReplicas: w.Replicas + w.surge(), Created: len(w.Sets)}
			w.Sets = append(w.Sets, rs)
		}
		if !p.Terminating {
			rs.Replicas++
		}
	}
	if len(w.Sets) == 1 {
		// One template: its set has the Deployment's replicas, whatever pods are being
		// replaced (an evicted pod leaves spec.replicas as it was, and the ReplicaSet
		// controller creates its replacement).
		w.Sets[0].Replicas = w.Replicas
	}
}

func (w *Workload[T]) set(t T) *ReplicaSet[T] {
	for _, rs := range w.Sets {
		if rs.Template == t {
			return rs
		}
	}
	return nil
}

// surge and unavailable are deploymentutil.MaxSurge and MaxUnavailable: none for
// Recreate, maxUnavailable at most the replicas.
func (w *Workload[T]) surge() int {
	if w.Recreate {
		return 0
	}
	return w.MaxSurge
}

func (w *Workload[T]) unavailable() int {
	if w.Recreate || w.Replicas == 0 {
		return 0
	}
	return min(w.MaxUnavailable, w.Replicas)
}

// newSet is getNewReplicaSet (deployment/sync.go): the set of the Deployment's template,
// created when create is set, sized by NewRSNewReplicas and annotated.
func (w *Workload[T]) newSet(create bool) *ReplicaSet[T] {
	if rs := w.set(w.Template); rs != nil || !create {
		return rs
	}
	rs := &ReplicaSet[T]{Template: w.Template, Desired: w.Replicas, MaxReplicas: w.Replicas + w.surge(), Created: w.nextCreated()}
	rs.Replicas = w.newRSNewReplicas(rs)
	w.Sets = append(w.Sets, rs)
	return rs
}

func (w *Workload[T]) nextCreated() int {
	n := 0
	for _, rs := range w.Sets {
		n = max(n, rs.Created+1)
	}
	return n
}

// oldSets are the sets of other templates, oldest first.
func (w *Workload[T]) oldSets() []*ReplicaSet[T] {
	var out []*ReplicaSet[T]
	for _, rs := range w.Sets {
		if rs.Template != w.Template {
			out = append(out, rs)
		}
	}
	slices.SortFunc(out, func(a, b *ReplicaSet[T]) int { return a.Created - b.Created })
	return out
}

// scaleReplicaSet is the Deployment controller's scaleReplicaSet (deployment/sync.go):
// the size, and the replicas annotations whenever it writes the set (or force).
func (w *Workload[T]) scaleReplicaSet(rs *ReplicaSet[T], n int, force bool) {
	if !force && rs.Replicas == n {
		return
	}
	rs.Replicas, rs.Desired, rs.MaxReplicas = n, w.Replicas, w.Replicas+w.surge()
}

// newRSNewReplicas is deploymentutil.NewRSNewReplicas.
func (w *Workload[T]) newRSNewReplicas(rs *ReplicaSet[T]) int {
	if w.Recreate {
		return w.Replicas
	}
	total := 0
	for _, s := range w.Sets {
		total += s.Replicas
	}
	maxTotal := w.Replicas + w.surge()
	if total >= maxTotal {
		return rs.Replicas
	}
	return rs.Replicas + min(maxTotal-total, w.Replicas-rs.Replicas)
}

// available counts a set's pods that are Ready and not terminating (its
// status.availableReplicas).
func (w *Workload[T]) available(rs *ReplicaSet[T]) int {
	n := 0
	for _, p := range w.Pods {
		if p.Template == rs.Template && !p.Terminating && w.Ready(p) {
			n++
		}
	}
	return n
}

// StaleScale is a Deployment kube 1.37 leaves stuck: a set annotated with other desired
// replicas than the Deployment's makes every sync a scaling event (isScalingEvent), and
// scale returns at once when the only active set already has the Deployment's replicas
// (deployment/sync.go, scale: FindActiveOrLatest), so the annotation is never written and
// no rollout is ever reconciled (kubernetes/kubernetes#138036, #138840, open). A scale to
// another count and back writes it.
func (w *Workload[T]) StaleScale() bool {
	if w.Kind != v1alpha1.KindDeployment || w.Paused || !w.scalingEvent() {
		return false
	}
	var active []*ReplicaSet[T]
	for _, rs := range w.Sets {
		if rs.Replicas > 0 {
			active = append(active, rs)
		}
	}
	return len(active) == 1 && active[0].Replicas == w.Replicas
}

// scalingEvent is isScalingEvent (deployment/sync.go): an active set annotated with other
// desired replicas than the Deployment's.
func (w *Workload[T]) scalingEvent() bool {
	for _, rs := range w.Sets {
		if rs.Replicas > 0 && rs.Desired != w.Replicas {
			return true
		}
	}
	return false
}

// rolloutRolling is rolling.go's rolloutRolling: reconcileNewReplicaSet, else
// reconcileOldReplicaSets.
func (w *Workload[T]) rolloutRolling() {
	rs := w.newSet(true)
	switch {
	case rs.Replicas > w.Replicas:
		w.scaleReplicaSet(rs, w.Replicas, false)
		return
	case rs.Replicas < w.Replicas:
		if n := w.newRSNewReplicas(rs); n != rs.Replicas {
			w.scaleReplicaSet(rs, n, false)
			return
		}
	}
	w.reconcileOldReplicaSets(rs)
}

// reconcileOldReplicaSets is rolling.go's reconcileOldReplicaSets, cleanupUnhealthyReplicas
// and scaleDownOldReplicaSetsForRollingUpdate.
func (w *Workload[T]) reconcileOldReplicaSets(newRS *ReplicaSet[T]) {
	old := w.oldSets()
	oldCount, all := 0, 0
	for _, rs := range w.Sets {
		all += rs.Replicas
		if rs != newRS {
			oldCount += rs.Replicas
		}
	}
	if oldCount == 0 {
		return
	}
	minAvailable := w.Replicas - w.unavailable()
	maxScaledDown := all - minAvailable - (newRS.Replicas - w.available(newRS))
	if maxScaledDown <= 0 {
		return
	}
	cleaned := 0
	for _, rs := range old {
		if cleaned >= maxScaledDown {
			break
		}
		avail := w.available(rs)
		if rs.Replicas == 0 || rs.Replicas == avail {
			continue
		}
		n := min(maxScaledDown-cleaned, rs.Replicas-avail)
		w.scaleReplicaSet(rs, rs.Replicas-n, false)
		cleaned += n
	}
	availableAll := 0
	for _, rs := range w.Sets {
		availableAll += w.available(rs)
	}
	if availableAll <= minAvailable {
		return
	}
	total, done := availableAll-minAvailable, 0
	for _, rs := range old {
		if done >= total {
			break
		}
		if rs.Replicas == 0 {
			continue
		}
		n := min(rs.Replicas, total-done)
		w.scaleReplicaSet(rs, rs.Replicas-n, false)
		done += n
	}
}

// rolloutRecreate is recreate.go's rolloutRecreate: every old set to zero, and the new set
// created and sized once no old pod is left.
func (w *Workload[T]) rolloutRecreate() {
	for _, rs := range w.oldSets() {
		if rs.Replicas > 0 {
			w.scaleReplicaSet(rs, 0, false)
			return
		}
	}
	for _, p := range w.Pods {
		if p.Template != w.Template {
			return // oldPodsRunning
		}
	}
	w.scaleReplicaSet(w.newSet(true), w.Replicas, false)
}

// scale is sync.go's scale: the one active (or latest) set takes the replicas; a saturated
// new set empties the others; otherwise a rolling Deployment's active sets share the
// difference in proportion to their size (GetReplicaSetProportion), the leftover to the
// largest.
func (w *Workload[T]) scale() {
	newRS := w.newSet(false)
	var active []*ReplicaSet[T]
	for _, rs := range w.Sets {
		if rs.Replicas > 0 {
			active = append(active, rs)
		}
	}
	if len(active) <= 1 { // FindActiveOrLatest
		target := newRS
		if len(active) == 1 {
			target = active[0]
		} else if target == nil {
			old := w.oldSets()
			if len(old) == 0 {
				return
			}
			target = old[len(old)-1]
		}
		if target.Replicas != w.Replicas {
			w.scaleReplicaSet(target, w.Replicas, false)
		}
		return
	}
	if newRS != nil && newRS.Replicas == w.Replicas && newRS.Desired == w.Replicas && w.available(newRS) == w.Replicas { // IsSaturated
		for _, rs := range active {
			if rs != newRS {
				w.scaleReplicaSet(rs, 0, false)
			}
		}
		return
	}
	if w.Recreate {
		return
	}
	total := 0
	for _, rs := range active {
		total += rs.Replicas
	}
	allowed := 0
	if w.Replicas > 0 {
		allowed = w.Replicas + w.surge()
	}
	toAdd := allowed - total
	// ReplicaSetsBySizeNewer when adding, BySizeOlder when removing: larger first.
	slices.SortStableFunc(active, func(a, b *ReplicaSet[T]) int {
		if a.Replicas != b.Replicas {
			return b.Replicas - a.Replicas
		}
		if toAdd > 0 {
			return b.Created - a.Created
		}
		return a.Created - b.Created
	})
	size := map[*ReplicaSet[T]]int{}
	added := 0
	for _, rs := range active {
		size[rs] = rs.Replicas
		if toAdd != 0 {
			p := w.proportion(rs, toAdd, added)
			size[rs] += p
			added += p
		}
	}
	for i, rs := range active {
		if i == 0 && toAdd != 0 {
			size[rs] = max(size[rs]+toAdd-added, 0)
		}
		w.scaleReplicaSet(rs, size[rs], true)
	}
}

// proportion is deploymentutil.GetReplicaSetProportion and getReplicaSetFraction.
func (w *Workload[T]) proportion(rs *ReplicaSet[T], toAdd, added int) int {
	if rs.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	var fraction int
	if w.Replicas == 0 {
		fraction = -rs.Replicas
	} else {
		before := rs.MaxReplicas
		if before == 0 {
			for _, p := range w.Pods { // status.replicas
				if !p.Terminating {
					before++
				}
			}
			if before == 0 {
				return 0
			}
		}
		fraction = int(math.Round(float64(rs.Replicas*(w.Replicas+w.surge()))/float64(before))) - rs.Replicas
	}
	if toAdd > 0 {
		return min(fraction, toAdd-added)
	}
	return max(fraction, toAdd-added)
}

// manageReplicas is the ReplicaSet controller's manageReplicas (replicaset/replica_set.go)
// for one set that has too few or too many pods: one pod created, or one deleted, the
// least serving first (controller.ActivePods: not Ready before Ready).
func (w *Workload[T]) manageReplicas() bool {
	for _, rs := range w.Sets {
		var pods []*Pod[T]
		for _, p := range w.Pods {
			if p.Template == rs.Template && !p.Terminating {
				pods = append(pods, p)
			}
		}
		switch {
		case len(pods) < rs.Replicas:
			w.Pods = append(w.Pods, w.NewPod(rs.Template, -1))
			return true
		case len(pods) > rs.Replicas:
			victim := pods[len(pods)-1] // the newest
			for _, p := range pods {
				if !w.Ready(p) {
					victim = p
					break
				}
			}
			w.delete(victim)
			return true
		}
	}
	return false
}
