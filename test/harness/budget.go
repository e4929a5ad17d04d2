package harness

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

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
	// Err is why the watch ended before it was stopped, if it did.
	Err error
}

// BudgetWatch follows the pods of a namespace through a watch, every event in the API
// server's order rather than samples, so that no moment over budget slips between two
// looks. A group is the pods with one value of a label.
type BudgetWatch struct {
	cancel context.CancelFunc
	done   chan BudgetResult
}

// WatchBudget lists the pods in ns and follows their changes. Each group (the pods whose
// label groupBy has one value) should have expected pods available (Ready and not
// terminating) and at most budget unavailable; its replacements count as unavailable
// until they are Ready, since until then they serve nothing.
func WatchBudget(ctx context.Context, cs kubernetes.Interface, ns, groupBy string, expected, budget int) (*BudgetWatch, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		}})
	if err != nil {
		cancel()
		return nil, err
	}
	s := &budgetState{groupBy: groupBy, expected: expected, budget: budget,
		serving: map[types.UID]bool{}, available: map[string]int{}}
	for i := range list.Items {
		s.apply(watch.Added, &list.Items[i])
	}
	s.live = true
	w := &BudgetWatch{cancel: cancel, done: make(chan BudgetResult, 1)}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				w.done <- s.res
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					s.res.Err = fmt.Errorf("the watch of pods in %s ended", ns)
					<-ctx.Done()
					w.done <- s.res
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						s.res.Events++
						s.apply(ev.Type, p)
					}
				case watch.Error:
					s.res.Err = fmt.Errorf("watching pods in %s: %v", ns, ev.Object)
				}
			}
		}
	}()
	return w, nil
}

// Stop ends the watch and returns what it saw.
func (w *BudgetWatch) Stop() BudgetResult {
	w.cancel()
	return <-w.done
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
		}
		if unavailable > s.budget {
			s.res.OverBudget++
		}
	}
}
