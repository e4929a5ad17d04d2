// Package podscope keeps holdfast's cache of pods, ReplicaSets and ControllerRevisions to
// those of the workloads its policies guard, so that its memory follows what is guarded
// and not the size of the cluster. A workload's ReplicaSets and revisions carry its
// template's labels, so the watches planned for its pods hold them too.
//
// The guarded workloads' selectors are planned into a few watches the API server filters
// (Plan): one per label key, across the cluster, selecting the pods whose value of that key
// is one a guarded workload's selector requires (app in (kube-apiserver, etcd)); and one
// per namespace for a guarded workload whose selector requires no value of any key. A pod
// read is served by a synced watch that covers it: the reader's label selector, or the
// selector of the owner it reads by, requires values the watch selects. A read no synced
// watch covers (a workload entering a selection, a watch still syncing after the scope
// widened) is read from the API server: never answered from a cache that may lack its pods.
package podscope

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Spec is one watch of the plan: the pods whose label Key has one of Values, in every
// namespace; or, with no Key, every pod of Namespace, or of the cluster with no Namespace
// either.
type Spec struct {
	Key       string
	Values    []string // sorted, distinct
	Namespace string
}

// Name identifies the watch: a label key's watch keeps its name as its values change.
func (s Spec) Name() string {
	if s.Key == "" && s.Namespace == "" {
		return "cluster"
	}
	if s.Key == "" {
		return "namespace/" + s.Namespace
	}
	return "label/" + s.Key
}

func (s Spec) String() string {
	if s.Key == "" && s.Namespace == "" {
		return "every pod"
	}
	if s.Key == "" {
		return "every pod in namespace " + s.Namespace
	}
	return s.Key + " in (" + strings.Join(s.Values, ",") + ")"
}

// Selector is the label selector the API server filters the watch's pods by.
func (s Spec) Selector() labels.Selector {
	if s.Key == "" {
		return labels.Everything()
	}
	r, err := labels.NewRequirement(s.Key, selection.In, s.Values)
	if err != nil {
		// Keys and values come from selectors the API server validated.
		return labels.Nothing()
	}
	return labels.NewSelector().Add(*r)
}

// Equal reports whether two specs watch the same pods.
func (s Spec) Equal(o Spec) bool {
	return s.Key == o.Key && s.Namespace == o.Namespace && slices.Equal(s.Values, o.Values)
}

// Covers reports whether every pod in namespace that sel selects is one this watch
// selects: sel requires a value of the watch's key, and each value it allows is one the
// watch selects. A nil selector is covered only by its namespace's watch.
func (s Spec) Covers(namespace string, sel labels.Selector) bool {
	if s.Key == "" {
		return s.Namespace == "" || s.Namespace == namespace
	}
	if sel == nil {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if r.Key() != s.Key || !valued(r) {
			continue
		}
		inside := true
		for v := range r.Values() {
			if _, ok := slices.BinarySearch(s.Values, v); !ok {
				inside = false
				break
			}
		}
		if inside {
			return true
		}
	}
	return false
}

// valued reports whether r requires its key to have one of a set of values (Equals or In):
// a pod it selects carries one of r.Values().
func valued(r labels.Requirement) bool {
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return r.Values().Len() > 0
	}
	return false
}

// Guarded is a guarded workload's pod selector and namespace, and its UID.
type Guarded struct {
	Namespace string
	Selector  labels.Selector
	UID       types.UID
}

// Bounds of a plan, beyond which it watches every pod instead, as holdfast did before it
// scoped its pod cache: the API server reads a watch's selector from its URL, and each
// namespace's watch is one more watch on it.
const (
	MaxSelectorBytes    = 256 << 10
	MaxNamespaceWatches = 100
)

// Plan turns the guarded workloads' selectors into watches. Each selector is watched by
// the key, among those it requires a value of, that the most selectors require (ties go to
// the smaller key), so that workloads labelled alike share one watch; a selector that
// requires no value of any key (only Exists or NotIn) is watched by its namespace. Past
// MaxSelectorBytes of values or MaxNamespaceWatches, one watch of every pod replaces them.
func Plan(guarded []Guarded) []Spec {
	keysOf := func(sel labels.Selector) []string {
		var keys []string
		reqs, _ := sel.Requirements()
		for _, r := range reqs {
			if valued(r) && !slices.Contains(keys, r.Key()) {
				keys = append(keys, r.Key())
			}
		}
		return keys
	}
	count := map[string]int{}
	for _, g := range guarded {
		for _, k := range keysOf(g.Selector) {
			count[k]++
		}
	}
	values := map[string]sets.Set[string]{}
	namespaces := sets.New[string]()
	for _, g := range guarded {
		best := ""
		for _, k := range keysOf(g.Selector) {
			if best == "" || count[k] > count[best] || (count[k] == count[best] && k < best) {
				best = k
			}
		}
		if best == "" {
			namespaces.Insert(g.Namespace)
			continue
		}
		if values[best] == nil {
			values[best] = sets.New[string]()
		}
		// Every value the selector's requirements on the key allow: its pods carry one of
		// them (a superset of what they may carry when several requirements name the key).
		reqs, _ := g.Selector.Requirements()
		for _, r := range reqs {
			if r.Key() == best && valued(r) {
				values[best].Insert(r.Values().UnsortedList()...)
			}
		}
	}
	var out []Spec
	size := 0
	for k, vs := range values {
		s := Spec{Key: k, Values: sets.List(vs)}
		for _, v := range s.Values {
			size += len(v) + 1
		}
		out = append(out, s)
	}
	for ns := range namespaces {
		out = append(out, Spec{Namespace: ns})
	}
	if size > MaxSelectorBytes || len(namespaces) > MaxNamespaceWatches {
		return []Spec{{}}
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}
