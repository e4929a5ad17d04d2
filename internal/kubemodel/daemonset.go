package kubemodel

import "slices"

// stepDaemonSet is one action of the DaemonSet controller (daemon/daemon_controller.go,
// manage: a pod created from the current template on each node that should run one and
// has none, a pod deleted from a node that should not; then, under RollingUpdate,
// update.go's rollingUpdate without surge).
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
	return w.rollDaemonSet()
}

// rollDaemonSet is rollingUpdate's maxSurge == 0 branch: a node whose pod is terminating,
// or whose new pod is not available, counts as unavailable; an old pod that is not
// available is replaced at once; available old pods are replaced while fewer than
// maxUnavailable nodes are unavailable.
func (w *Workload[T]) rollDaemonSet() bool {
	budget := max(w.MaxUnavailable, 1)
	unavailable := 0
	var replace, candidates []*Pod[T]
	for _, p := range w.Pods {
		switch {
		case p.Terminating:
			unavailable++
		case p.Template == w.Template:
			if !w.Ready(p) {
				unavailable++
			}
		case !w.Ready(p):
			replace = append(replace, p)
			unavailable++
		default:
			candidates = append(candidates, p)
		}
	}
	n := min(max(budget-unavailable, 0), len(candidates))
	victims := append(replace, candidates[:n]...)
	for _, p := range victims {
		w.delete(p)
	}
	return len(victims) > 0
}
