package sim

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// schedule binds the workload's pending pods, and forgets the pods its controller removed.
func (s *sim) schedule(w *simWorkload) {
	for _, p := range slices.Clone(w.k.Pods) {
		if obj := w.objects[p]; p.Terminating && obj.DeletionTimestamp == nil {
			// Deleted by its controller: terminating, or gone at once if never scheduled.
			if obj.Spec.NodeName == "" {
				w.k.Remove(p)
				continue
			}
			obj.DeletionTimestamp = ptr.To(metav1.NewTime(s.now))
			s.store.Put(obj)
			w.dirty = true
		}
	}
	if len(w.objects) > len(w.k.Pods) {
		// The controller removed some: forget them, in creation order.
		live := make(map[*pod]bool, len(w.k.Pods))
		for _, p := range w.k.Pods {
			live[p] = true
		}
		for _, p := range sortedPods(w.objects) {
			if !live[p] {
				s.gone(w, p, w.objects[p])
			}
		}
	}
	if len(w.pending) == 0 || w.triedAt == s.placements {
		return // nothing has changed for its pending pods
	}
	var still []*pod
	for _, p := range w.pending {
		if w.objects[p] == nil {
			continue // removed before it was placed
		}
		n := s.place(w, p)
		if n == nil {
			still = append(still, p)
			continue
		}
		obj := w.objects[p]
		obj.Spec.NodeName = n.obj.Name
		obj.Status.Phase = corev1.PodRunning
		n.pods = append(n.pods, obj)
		p.ReadyAt = s.now.Add(s.startup)
		s.store.Put(obj)
	}
	w.pending = still
	if len(still) > 0 {
		w.triedAt = s.placements
	}
}

// sortedPods is the pods in creation order, so that what follows from them is the same on every run.
func sortedPods(objs map[*pod]*corev1.Pod) []*pod {
	out := make([]*pod, 0, len(objs))
	for p := range objs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return objs[out[i]].UID < objs[out[j]].UID })
	return out
}

func (s *sim) gone(w *simWorkload, p *pod, obj *corev1.Pod) {
	delete(w.objects, p)
	if n := s.nodeByNam[obj.Spec.NodeName]; n != nil {
		n.pods = slices.DeleteFunc(n.pods, func(o *corev1.Pod) bool { return o == obj })
	}
	s.placements++
	s.store.Remove(obj)
	// A StatefulSet's replacement has the name of the pod it replaces.
	for _, o := range w.objects {
		if o.Name == obj.Name {
			s.store.Put(o)
		}
	}
	w.dirty = true
}

// place is the scheduler: a DaemonSet pod goes to its node; another pod to the
// schedulable node with the fewest pods that its nodeSelector and required pod
// anti-affinity (by hostname) allow.
func (s *sim) place(w *simWorkload, p *pod) *node {
	if w.ref.Kind == v1alpha1.KindDaemonSet {
		return s.nodes[p.Slot]
	}
	obj := w.objects[p]
	var best *node
	for _, n := range s.nodes {
		if n.obj.Spec.Unschedulable || !labels.SelectorFromSet(obj.Spec.NodeSelector).Matches(labels.Set(n.obj.Labels)) || s.repelled(obj, n) {
			continue
		}
		if best == nil || len(n.pods) < len(best.pods) {
			best = n
		}
	}
	return best
}

// repelled is a node where a pod that obj's required anti-affinity (by hostname) selects runs.
func (s *sim) repelled(obj *corev1.Pod, n *node) bool {
	if obj.Spec.Affinity == nil || obj.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range obj.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			continue
		}
		for _, o := range n.pods {
			if o.Namespace == obj.Namespace && sel.Matches(labels.Set(o.Labels)) {
				return true
			}
		}
	}
	return false
}
