package sim

import (
	"cmp"
	"math"
	"slices"
	"time"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// sample updates the figures from what the cluster looks like now.
func (s *sim) sample() {
	for _, w := range s.workloads {
		if !w.exists {
			continue
		}
		f := w.fig
		live, serving := 0, 0
		withPods := map[string]bool{}
		// rolled is rolledOut, read in the same pass over the pods.
		rolled := true
		for _, p := range w.k.Pods {
			if p.Terminating {
				rolled = false
				continue
			}
			live++
			withPods[p.Template] = true
			if s.ready(p) {
				serving++
			} else {
				rolled = false
			}
			if !current(w, p) {
				rolled = false
			}
		}
		want := w.k.Wanted()
		f.PeakPods = max(f.PeakPods, live)
		f.PeakRevisionsWithPods = max(f.PeakRevisionsWithPods, len(withPods))
		// Converged since: rolled out, and the operator, if any, has what it last wanted.
		if converged := rolled && live == want && (w.op == nil || w.op.done); !converged {
			w.convergedAt = time.Time{}
		} else if w.convergedAt.IsZero() {
			w.convergedAt = s.now
		}
		// Pods still starting after a CREATE are not a disruption: count from the first
		// moment every wanted pod served.
		w.serving = w.serving || serving >= want
		if !w.serving {
			continue
		}
		// A scale up is measured against the old count until the new one serves.
		if want <= w.expected || serving >= want || w.expected == 0 {
			w.expected = want
		}
		expected := w.expected
		f.MaxUnavailable = max(f.MaxUnavailable, expected-serving)
		for _, key := range s.domainKeys() {
			if f.MaxDisruptedDomains == nil {
				f.MaxDisruptedDomains = map[string]int{}
			}
			f.MaxDisruptedDomains[key] = max(f.MaxDisruptedDomains[key], s.disruptedDomains(w, key, serving >= expected))
		}
		if !w.sampled || serving < f.MinReady {
			f.MinReady = serving
		}
		w.sampled = true
	}
}

// finish computes the figures that need the whole run.
func (s *sim) finish() {
	s.res.Seconds = math.Round(s.at()*10) / 10
	for _, w := range s.workloads {
		f := w.fig
		f.Revisions = len(w.revisions)
		f.Evictions = len(w.evictedAt)
		f.MinEvictionGapSeconds = -1
		for i := 1; i < len(w.evictedAt); i++ {
			gap := math.Round(w.evictedAt[i].Sub(w.evictedAt[i-1]).Seconds()*10) / 10
			if f.MinEvictionGapSeconds < 0 || gap < f.MinEvictionGapSeconds {
				f.MinEvictionGapSeconds = gap
			}
		}
		f.Converged = w.exists && rolledOut(s, w)
		for _, o := range s.operators {
			if o.w == w {
				f.Refusals += o.refusals // every writer's
				f.Converged = f.Converged && o.done
			}
		}
		f.ConvergedSeconds = -1
		if f.Converged {
			// A run that ends at spec.until is not sampled there: it converged then at the latest.
			at := cmp.Or(w.convergedAt, s.now)
			f.ConvergedSeconds = max(0, math.Round(at.Sub(epoch).Seconds()*10)/10)
		}
		s.res.Workloads = append(s.res.Workloads, *f)
	}
}

// rolledOut is every pod on the current template (below a StatefulSet's partition, any)
// and Ready, as many as wanted.
func rolledOut(s *sim, w *simWorkload) bool {
	want := w.k.Wanted()
	n := 0
	for _, p := range w.k.Pods {
		if !current(w, p) || !s.ready(p) {
			return false
		}
		n++
	}
	return n == want
}

// current is a pod on the revision its workload's rollout wants it on: the current
// template, or any below a StatefulSet's partition, whose ordinals keep their revision.
func current(w *simWorkload, p *pod) bool {
	below := w.ref.Kind == v1alpha1.KindStatefulSet && !w.k.OnDelete && p.Slot < w.k.Partition
	return p.Template == w.k.Template || below
}

// domainKeys are the node labels the scenario's expectations count disrupted domains by.
func (s *sim) domainKeys() []string {
	var keys []string
	add := func(l scenariov1alpha1.Limits) {
		if d := l.MaxDisruptedDomains; d != nil && !slices.Contains(keys, d.Key) {
			keys = append(keys, d.Key)
		}
	}
	if e := s.sc.Spec.Expect; e != nil {
		add(e.Limits)
		for _, w := range e.Workloads {
			add(w.Limits)
		}
	}
	return keys
}

// disruptedDomains counts the domains of key with pods of w evicted and not yet replaced,
// from the simulated pods alone: an eviction is replaced by a serving pod created after it
// (each pod replaces one eviction), or once the workload is whole.
func (s *sim) disruptedDomains(w *simWorkload, key string, whole bool) int {
	if whole {
		return 0
	}
	used := map[*pod]bool{}
	domains := map[string]bool{}
	for _, d := range w.disruptions {
		domain := d.labels[key]
		if domain == "" {
			continue // in no domain: the node lacks the label, or has it empty
		}
		replaced := false
		for _, p := range w.k.Pods {
			if !used[p] && !p.Terminating && !p.Created.Before(d.at) && s.ready(p) {
				used[p], replaced = true, true
				break
			}
		}
		if !replaced {
			domains[domain] = true
		}
	}
	return len(domains)
}
