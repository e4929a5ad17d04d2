package podscope

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Planner keeps the Scope's plan to the workloads the policies guard: it plans again
// (after Debounce) whenever a policy, a namespace's labels or a workload's labels or pod
// template labels change, and when a plan the Scope held back can be applied (Again).
type Planner struct {
	Scope *Scope
	// Cache is the manager's cache: the policies, namespaces and workloads, and their informers.
	Cache   crcache.Cache
	Matcher *policy.Matcher
	Log     logr.Logger
	// Debounce gathers a burst of changes into one plan; 0 means 250 ms.
	Debounce time.Duration
}

// NeedLeaderElection is false: every replica reads its own pods.
func (p *Planner) NeedLeaderElection() bool { return false }

// Start plans once the manager's cache has synced and again on every change, until ctx ends.
func (p *Planner) Start(ctx context.Context) error {
	s := p.Scope
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	watched := []client.Object{&v1alpha1.RolloutPolicy{}, &v1alpha1.DisruptionPolicy{}, policy.NamespaceMetadata()}
	for _, k := range workload.Kinds() {
		obj, _ := workload.New(k)
		watched = append(watched, obj)
	}
	for _, obj := range watched {
		inf, err := p.Cache.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching %T for the pod scope: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			DeleteFunc: func(any) { poke() },
			UpdateFunc: func(a, b any) {
				if planChanged(a, b) {
					poke()
				}
			},
		}); err != nil {
			return fmt.Errorf("watching %T for the pod scope: %w", obj, err)
		}
	}
	if !p.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	debounce := p.Debounce
	if debounce == 0 {
		debounce = 250 * time.Millisecond
	}
	for {
		guarded, err := GuardedSelectors(ctx, p.Cache, p.Matcher)
		if err != nil {
			p.Log.Error(err, "Planning the pod watches; the current ones stay")
			// Planned again in a second, should no change come first: a plan held back
			// (Again) would otherwise wait for the next change.
			time.AfterFunc(time.Second, s.signalAgain)
		} else {
			s.setGuarded(guarded)
			s.Apply(Plan(guarded), p.Log)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-s.Again(): // a plan held back while a watch synced
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(debounce):
		}
	}
}

// planChanged reports whether an update may change the plan: a policy's spec, a
// namespace's labels, a workload's labels or pod template labels.
func planChanged(a, b any) bool {
	oa, ok1 := a.(client.Object)
	ob, ok2 := b.(client.Object)
	if !ok1 || !ok2 {
		return true
	}
	switch ob.(type) {
	case *v1alpha1.RolloutPolicy, *v1alpha1.DisruptionPolicy:
		return oa.GetGeneration() != ob.GetGeneration()
	case *metav1.PartialObjectMetadata:
		return !maps.Equal(oa.GetLabels(), ob.GetLabels())
	}
	ma, okA := workload.MetaOf(oa)
	mb, okB := workload.MetaOf(ob)
	return !okA || !okB || !maps.Equal(ma.Labels, mb.Labels) || !maps.Equal(ma.PodLabels, mb.PodLabels)
}

// GuardedSelectors lists, from the cache, the selectors of the workloads a policy guards: a
// RolloutPolicy selects the workload, or a DisruptionPolicy selects its pod template's
// labels. Pods a DisruptionPolicy selects by labels their template lacks (a relabelled
// pod) are read from the API server when they are evicted.
func GuardedSelectors(ctx context.Context, r client.Reader, m *policy.Matcher) ([]Guarded, error) {
	var rps v1alpha1.RolloutPolicyList
	var dps v1alpha1.DisruptionPolicyList
	if err := informer.List(ctx, r, &rps); err != nil {
		return nil, err
	}
	if err := informer.List(ctx, r, &dps); err != nil {
		return nil, err
	}
	if len(rps.Items) == 0 && len(dps.Items) == 0 {
		return nil, nil
	}
	nsLabels, err := policy.AllNamespaceLabels(ctx, r)
	if err != nil {
		return nil, err
	}
	var out []Guarded
	for _, k := range workload.Kinds() {
		err := workload.Each(ctx, r, k, func(obj client.Object) {
			w, ok := workload.MetaOf(obj)
			if !ok || !guards(m, rps.Items, dps.Items, w, nsLabels[w.Namespace]) {
				return
			}
			sel, err := metav1.LabelSelectorAsSelector(w.Selector)
			if err != nil || w.Selector == nil {
				sel = labels.Everything() // watched by its namespace
			}
			out = append(out, Guarded{Namespace: w.Namespace, Selector: sel, UID: w.UID})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func guards(m *policy.Matcher, rps []v1alpha1.RolloutPolicy, dps []v1alpha1.DisruptionPolicy, w workload.Meta, nsLabels map[string]string) bool {
	for i := range rps {
		if ok, err := m.Selects(rps[i].Spec.Targets, w.Kind, nsLabels, w.Labels); err == nil && ok {
			return true
		}
	}
	for i := range dps {
		if ok, err := m.SelectsPods(dps[i].Spec.Targets, nsLabels, w.PodLabels); err == nil && ok {
			return true
		}
	}
	return false
}
