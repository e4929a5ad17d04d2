package harness

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

// BudgetResult is what a BudgetWatch saw.
type BudgetResult struct {
	// OverBudget counts the available pods that went (turned terminating, or vanished)
	// and left their group with more pods unavailable than its budget.
	OverBudget int
	// MaxUnavailable is the most pods of one group seen unavailable at once.
	MaxUnavailable int
	// Evictions counts available pods seen turning terminating; Events, the watch events.
	Evictions, Events int
	// Evicted counts the available pods among them that the eviction API took (those
	// with its DisruptionTarget condition), as against their controllers' deletes.
	Evicted int
	// Err is why the watch ended before it was stopped, if it did.
	Err error
}

// BudgetWatch follows the pods of a namespace through a watch, every event in the API
// server's order rather than samples, so that no moment over budget slips between two
// looks. A group is the pods with one value of a label.
type BudgetWatch struct {
	follow *podFollower
	state  *budgetState
}

// WatchBudget lists the pods in ns and follows their changes. Each group (the pods whose
// label groupBy has one value) should have expected pods available (Ready and not
// terminating) and at most budget unavailable; its replacements count as unavailable
// until they are Ready, since until then they serve nothing.
func WatchBudget(ctx context.Context, cs kubernetes.Interface, ns, groupBy string, expected, budget int) (*BudgetWatch, error) {
	s := &budgetState{groupBy: groupBy, expected: expected, budget: budget,
		serving: map[types.UID]bool{}, available: map[string]int{}}
	f, err := followPods(ctx, cs, ns, "", func(pods []corev1.Pod) {
		for i := range pods {
			s.apply(watch.Added, &pods[i])
		}
		s.live = true
	}, func(t watch.EventType, p *corev1.Pod) {
		s.res.Events++
		s.apply(t, p)
	})
	if err != nil {
		return nil, err
	}
	return &BudgetWatch{follow: f, state: s}, nil
}

// Stop ends the watch and returns what it saw.
func (w *BudgetWatch) Stop() BudgetResult {
	w.state.res.Err = w.follow.stop()
	return w.state.res
}

// budgetState is the pods' availability per group, as of the last event applied.
type budgetState struct {
	groupBy          string
	expected, budget int
	serving          map[types.UID]bool
	available        map[string]int
	// live is false while the listed pods are applied: the counts start after them.
	live bool
	res  BudgetResult
}

func (s *budgetState) apply(t watch.EventType, p *corev1.Pod) {
	group, ok := p.Labels[s.groupBy]
	if !ok {
		return
	}
	was := s.serving[p.UID]
	now := t != watch.Deleted && workload.PodServing(p)
	if t == watch.Deleted {
		delete(s.serving, p.UID)
	} else {
		s.serving[p.UID] = now
	}
	switch {
	case was && !now:
		s.available[group]--
	case !was && now:
		s.available[group]++
	}
	if !s.live {
		return
	}
	unavailable := s.expected - s.available[group]
	s.res.MaxUnavailable = max(s.res.MaxUnavailable, unavailable)
	// An available pod that goes takes the group below its expected count: in a drain
	// only an eviction does that (a pod that merely turns not Ready stays in the count
	// of MaxUnavailable, not here).
	if was && !now && (t == watch.Deleted || p.DeletionTimestamp != nil) {
		if t != watch.Deleted {
			s.res.Evictions++
			if evictedByAPI(p) {
				s.res.Evicted++
			}
		}
		if unavailable > s.budget {
			s.res.OverBudget++
		}
	}
}

// evictedByAPI reports a pod the eviction API took: kube marks it with a DisruptionTarget
// condition before deleting it (pkg/registry/core/pod/storage/eviction.go, EvictionREST.Create).
func evictedByAPI(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}
