package kubemodel

import "slices"

// stepStatefulSet is one action of the StatefulSet controller's updateStatefulSet
// (statefulset/stateful_set_control.go, kube 1.37 with MaxUnavailableStatefulSet on by
// default): missing ordinals created, condemned ordinals deleted, then a RollingUpdate's
// deletions of old-revision pods at or above the partition
// (updateStatefulSetAfterInvariantEstablished). OrderedReady is its monotonic mode.
func (w *Workload[T]) stepStatefulSet() bool {
	if !w.HasCurrent {
		w.Current, w.HasCurrent = w.Template, true
	}
	w.completeUpdate()
	monotonic := w.OrderedReady
	slots := w.BySlot()
	// processReplica, in ordinal order.
	for i := range w.Replicas {
		p := slots[i]
		if p == nil {
			w.Pods = append(w.Pods, w.NewPod(w.versionedTemplate(i), i))
			return true
		}
		if monotonic && (p.Terminating || !w.Ready(p)) {
			return false // each ordinal Running and Ready before the next is looked at
		}
	}
	// processCondemned, highest ordinal first; in monotonic mode only the first unhealthy
	// pod (replicas first, then condemned by ascending ordinal) may go while unhealthy.
	var condemned []*Pod[T]
	for _, p := range w.Pods {
		if p.Slot >= w.Replicas {
			condemned = append(condemned, p)
		}
	}
	slices.SortFunc(condemned, func(a, b *Pod[T]) int { return b.Slot - a.Slot })
	var firstUnhealthy *Pod[T]
	for i := range w.Replicas {
		if p := slots[i]; w.unavailablePod(p) {
			firstUnhealthy = p
			break
		}
	}
	for i := len(condemned) - 1; i >= 0 && firstUnhealthy == nil; i-- {
		if w.unavailablePod(condemned[i]) {
			firstUnhealthy = condemned[i]
		}
	}
	for _, p := range condemned {
		if p.Terminating {
			if monotonic {
				return false
			}
			continue
		}
		if monotonic && !w.Ready(p) && p != firstUnhealthy {
			return false
		}
		w.delete(p)
		return true
	}
	if w.OnDelete {
		return false
	}
	return w.rollStatefulSet(slots)
}

// rollStatefulSet is updateStatefulSetAfterInvariantEstablished: nothing while
// maxUnavailable pods are unavailable (unless, under Parallel, one of them is an old
// pod to replace); Parallel first deletes the old pods that are unavailable, then
// available old ones within the budget; OrderedReady deletes the highest old ones within
// the budget. All at or above the partition.
func (w *Workload[T]) rollStatefulSet(slots map[int]*Pod[T]) bool {
	budget := max(w.MaxUnavailable, 1)
	unavailable, needing := 0, 0
	for i := range w.Replicas {
		p := slots[i]
		if w.unavailablePod(p) {
			unavailable++
			if !w.OrderedReady && p.Template != w.Template && !p.Terminating {
				needing++
			}
		}
	}
	if unavailable >= budget && needing == 0 {
		return false
	}
	acted := false
	if !w.OrderedReady {
		for i := w.Replicas - 1; i >= w.Partition; i-- {
			if p := slots[i]; p.Template != w.Template && !p.Terminating && !w.Ready(p) {
				w.delete(p)
				acted = true
			}
		}
	}
	for i := w.Replicas - 1; i >= w.Partition && budget-unavailable > 0; i-- {
		p := slots[i]
		if p.Template == w.Template || p.Terminating || (!w.OrderedReady && !w.Ready(p)) {
			continue
		}
		w.delete(p)
		acted = true
		unavailable++
	}
	return acted
}

// unavailablePod is isUnavailable: not Running and Available, or terminating.
func (w *Workload[T]) unavailablePod(p *Pod[T]) bool {
	return p.Terminating || !w.Ready(p)
}

// versionedTemplate is newVersionedStatefulSetPod (statefulset/stateful_set_utils.go): an
// ordinal below a RollingUpdate's partition is created on the current revision, any other
// (OnDelete's included) on the update revision. OldTemplateOnCreate instead takes a
// template another pod runs below the partition or under OnDelete.
func (w *Workload[T]) versionedTemplate(i int) T {
	switch {
	case w.OldTemplateOnCreate && (i < w.Partition || w.OnDelete):
		return w.lastFull(i)
	case !w.OldTemplateOnCreate && !w.OnDelete && i < w.Partition:
		return w.Current
	}
	return w.Template
}

// completeUpdate is completeUpdate (statefulset/stateful_set_utils.go), run by
// updateStatefulSetStatus whatever the strategy: once as many pods as the replicas exist,
// all of them on the update revision and Ready, status.currentRevision becomes it.
func (w *Workload[T]) completeUpdate() {
	created, updated, ready := 0, 0, 0
	for _, p := range w.Pods {
		created++
		if p.Terminating {
			continue
		}
		if p.Template == w.Template {
			updated++
		}
		if w.Ready(p) {
			ready++
		}
	}
	if created == w.Replicas && updated == w.Replicas && ready == w.Replicas {
		w.Current = w.Template
	}
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
