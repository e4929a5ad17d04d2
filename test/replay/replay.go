// Package replay generates sequences of operations on one workload (creates of every kind
// and strategy, template edits and returns, scales, partition changes, strategy switches,
// pod deletes, readiness, DaemonSet nodes joining and leaving), runs them through
// internal/kubemodel and compares what the model says at each quiescent point with what
// kube's controllers did (e2e/replay_test.go applies the same sequences on the kwok test
// bed). Templates are numbered: template t of a sequence is the same pod template on both
// sides.
package replay

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/kubemodel"
)

// Nodes is how many node slots a DaemonSet sequence may put in its pool.
const Nodes = 6

// Spec is the workload's spec and the world around it after a step.
type Spec struct {
	Kind     v1alpha1.WorkloadKind
	Template int
	Replicas int // Deployment, StatefulSet
	// Deployment: Recreate, or RollingUpdate with MaxSurge and MaxUnavailable.
	Recreate bool
	MaxSurge int
	// MaxUnavailable of a Deployment's, StatefulSet's or DaemonSet's RollingUpdate.
	MaxUnavailable int
	// StatefulSet: Parallel (immutable) and a RollingUpdate's Partition.
	Parallel  bool
	Partition int
	// OnDelete strategy of a StatefulSet or DaemonSet.
	OnDelete bool
	// Nodes are the node slots in a DaemonSet's pool, ascending.
	Nodes []int
	// Broken are the templates whose pods are not Ready, ascending.
	Broken []int
}

// Victim is a pod the step deletes once the spec is applied: a StatefulSet's ordinal or
// a DaemonSet's node slot (Slot), or any pod of Template (a Deployment's).
type Victim struct {
	Slot     int
	Template int
}

// Step is one operation: the spec after it, and a pod to delete.
type Step struct {
	Op     string
	Spec   Spec
	Delete *Victim
	// Leave is the node slot leaving a DaemonSet's pool and the template its pod runs
	// (-1: none). A DaemonSet's nodes are alike: kube picks the nodes it updates in map
	// order, so the replay on kube takes a node whose pod runs that template as the slot
	// (and the same for a DaemonSet pod it deletes).
	Leave *Victim
}

// Sequence is the steps on one workload; the first creates it.
type Sequence struct {
	Name  string
	Steps []Step
}

// Shape is a sequence's starting kind and strategy.
func (s Sequence) Shape() string { return s.Steps[0].Spec.Shape() }

// Shape names the kind and strategy of a spec.
func (s Spec) Shape() string {
	switch s.Kind {
	case v1alpha1.KindDeployment:
		if s.Recreate {
			return "Deployment/Recreate"
		}
		return "Deployment/RollingUpdate"
	case v1alpha1.KindStatefulSet:
		policy := "OrderedReady"
		if s.Parallel {
			policy = "Parallel"
		}
		if s.OnDelete {
			return "StatefulSet/" + policy + "/OnDelete"
		}
		return "StatefulSet/" + policy + "/RollingUpdate"
	default:
		if s.OnDelete {
			return "DaemonSet/OnDelete"
		}
		return "DaemonSet/RollingUpdate"
	}
}

// starts are the shapes sequences start from, in turn.
var starts = []Spec{
	{Kind: v1alpha1.KindDeployment, Replicas: 3, MaxSurge: 1, MaxUnavailable: 0},
	{Kind: v1alpha1.KindDeployment, Replicas: 4, MaxSurge: 0, MaxUnavailable: 1},
	{Kind: v1alpha1.KindDeployment, Replicas: 4, MaxSurge: 2, MaxUnavailable: 1},
	{Kind: v1alpha1.KindDeployment, Replicas: 3, Recreate: true, MaxSurge: 1, MaxUnavailable: 1},
	{Kind: v1alpha1.KindStatefulSet, Replicas: 3, MaxUnavailable: 1},
	{Kind: v1alpha1.KindStatefulSet, Replicas: 4, MaxUnavailable: 1, Partition: 2},
	{Kind: v1alpha1.KindStatefulSet, Replicas: 4, MaxUnavailable: 2, Parallel: true},
	{Kind: v1alpha1.KindStatefulSet, Replicas: 3, MaxUnavailable: 1, Parallel: true, Partition: 1},
	{Kind: v1alpha1.KindStatefulSet, Replicas: 3, MaxUnavailable: 1, OnDelete: true},
	{Kind: v1alpha1.KindStatefulSet, Replicas: 3, MaxUnavailable: 1, OnDelete: true, Parallel: true},
	{Kind: v1alpha1.KindDaemonSet, MaxUnavailable: 1, Nodes: []int{0, 1, 2}},
	{Kind: v1alpha1.KindDaemonSet, MaxUnavailable: 2, Nodes: []int{0, 1, 2, 3}},
	{Kind: v1alpha1.KindDaemonSet, MaxUnavailable: 1, OnDelete: true, Nodes: []int{0, 1, 2}},
}

// Shapes is how many starting shapes there are: n sequences with n >= Shapes cover them all.
func Shapes() int { return len(starts) }

// maxTemplates keeps a sequence within kube's revision history (10 old revisions), so
// that every template keeps its revision on both sides.
const maxTemplates = 5

// Generate makes n sequences of steps operations after the create, from seed. The
// sequence i starts from shape i mod Shapes(). Each operation is chosen among those that
// change something for the model's state at that point.
func Generate(seed uint64, n, steps int) []Sequence {
	out := make([]Sequence, n)
	for i := range n {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		spec := clone(starts[i%len(starts)])
		spec.Template = 0
		seq := Sequence{Name: fmt.Sprintf("replay-%02d", i), Steps: []Step{{Op: "create", Spec: clone(spec)}}}
		m := NewModel(Correct)
		m.Apply(seq.Steps[0])
		for len(seq.Steps) <= steps {
			st := next(r, spec, m)
			if st == nil {
				continue
			}
			spec = clone(st.Spec)
			m.Apply(*st)
			seq.Steps = append(seq.Steps, *st)
		}
		out[i] = seq
	}
	return out
}

// next draws one operation from spec's state; nil when the drawn one does not apply.
func next(r *rand.Rand, spec Spec, m *Model) *Step {
	s := clone(spec)
	templates := 0
	for t := range m.w.Revisions {
		templates = max(templates, t+1)
	}
	st := &Step{}
	switch ops := opsFor(s.Kind); ops[r.IntN(len(ops))] {
	case "edit":
		if templates >= maxTemplates {
			return nil
		}
		st.Op, s.Template = "edit", templates
	case "edit-broken":
		if templates >= maxTemplates {
			return nil
		}
		st.Op, s.Template = "edit-broken", templates
		s.Broken = add(s.Broken, templates)
	case "return":
		if templates < 2 {
			return nil
		}
		t := r.IntN(templates)
		if t == s.Template {
			return nil
		}
		st.Op, s.Template = "return", t
	case "scale":
		n := 1 + r.IntN(5)
		if n == s.Replicas {
			return nil
		}
		st.Op, s.Replicas = "scale", n
		s.Partition = min(s.Partition, n)
	case "partition":
		if s.OnDelete {
			return nil
		}
		p := r.IntN(s.Replicas + 1)
		if p == s.Partition {
			return nil
		}
		st.Op, s.Partition = "partition", p
	case "strategy":
		st.Op = "strategy"
		switch s.Kind {
		case v1alpha1.KindDeployment:
			s.Recreate = !s.Recreate
			if !s.Recreate {
				s.MaxSurge, s.MaxUnavailable = r.IntN(3), r.IntN(3)
				if s.MaxSurge == 0 && s.MaxUnavailable == 0 {
					s.MaxUnavailable = 1
				}
			}
		default:
			s.OnDelete = !s.OnDelete
			s.Partition = 0
		}
	case "surge":
		if s.Recreate {
			return nil
		}
		st.Op = "surge"
		s.MaxSurge, s.MaxUnavailable = r.IntN(3), r.IntN(3)
		if s.MaxSurge == 0 && s.MaxUnavailable == 0 {
			s.MaxSurge = 1
		}
	case "delete":
		pods := m.w.Pods
		if len(pods) == 0 {
			return nil
		}
		p := pods[r.IntN(len(pods))]
		st.Op, st.Delete = "delete-pod", &Victim{Slot: p.Slot, Template: p.Template}
	case "break":
		t := r.IntN(templates)
		if slices.Contains(s.Broken, t) {
			return nil
		}
		st.Op, s.Broken = "break", add(s.Broken, t)
	case "heal":
		if len(s.Broken) == 0 {
			return nil
		}
		t := s.Broken[r.IntN(len(s.Broken))]
		st.Op, s.Broken = "heal", slices.DeleteFunc(slices.Clone(s.Broken), func(b int) bool { return b == t })
	case "join":
		free := []int{}
		for n := range Nodes {
			if !slices.Contains(s.Nodes, n) {
				free = append(free, n)
			}
		}
		if len(free) == 0 {
			return nil
		}
		st.Op, s.Nodes = "node-join", add(s.Nodes, free[r.IntN(len(free))])
	case "leave":
		if len(s.Nodes) <= 1 {
			return nil
		}
		n := s.Nodes[r.IntN(len(s.Nodes))]
		st.Op, s.Nodes = "node-leave", slices.DeleteFunc(slices.Clone(s.Nodes), func(x int) bool { return x == n })
		st.Leave = &Victim{Slot: n, Template: -1}
		if p := m.w.BySlot()[n]; p != nil {
			st.Leave.Template = p.Template
		}
	}
	st.Spec = s
	return st
}

func opsFor(kind v1alpha1.WorkloadKind) []string {
	common := []string{"edit", "edit", "edit-broken", "return", "delete", "break", "heal", "strategy"}
	switch kind {
	case v1alpha1.KindDeployment:
		return append(common, "scale", "scale", "surge")
	case v1alpha1.KindStatefulSet:
		return append(common, "scale", "partition", "partition")
	default:
		return append(common, "join", "join", "leave")
	}
}

func add(s []int, v int) []int {
	out := append(slices.Clone(s), v)
	slices.Sort(out)
	return slices.Compact(out)
}

func clone(s Spec) Spec {
	s.Nodes, s.Broken = slices.Clone(s.Nodes), slices.Clone(s.Broken)
	return s
}

// Observation is what is compared at a quiescent point: pods by template (terminating
// ones included), each template's revision number, and a StatefulSet's current revision
// (status.currentRevision; -1 for other kinds).
type Observation struct {
	Pods      map[int]int
	Revisions map[int]int64
	Current   int
}

func (o Observation) String() string {
	return fmt.Sprintf("pods %s revisions %s current %d", sorted(o.Pods), sorted(o.Revisions), o.Current)
}

func sorted[V int | int64](m map[int]V) string {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "t%d:%d", k, m[k])
	}
	b.WriteString("}")
	return b.String()
}

// Equal compares two observations.
func (o Observation) Equal(p Observation) bool {
	return maps.Equal(o.Pods, p.Pods) && maps.Equal(o.Revisions, p.Revisions) && o.Current == p.Current
}

// Fault is a deliberately wrong model, for the self-test.
type Fault int

const (
	Correct Fault = iota
	// OldTemplateOrdinals creates StatefulSet ordinals on a template other pods run
	// (kubemodel's OldTemplateOnCreate).
	OldTemplateOrdinals
	// IgnoreNodeJoins keeps a DaemonSet on the nodes it was created with.
	IgnoreNodeJoins
)

// Model runs a sequence through internal/kubemodel.
type Model struct {
	fault Fault
	w     *kubemodel.Workload[int]
	// first are a DaemonSet's nodes when it was created.
	first []int
}

// NewModel is a model with fault.
func NewModel(fault Fault) *Model { return &Model{fault: fault} }

// Apply applies a step and lets the controller act until it has nothing left to do.
func (m *Model) Apply(st Step) {
	s := st.Spec
	if m.w == nil {
		m.w = &kubemodel.Workload[int]{Kind: s.Kind,
			NewPod: func(t, slot int) *kubemodel.Pod[int] { return &kubemodel.Pod[int]{Template: t, Slot: slot} }}
	}
	broken := slices.Clone(s.Broken)
	w := m.w
	w.Ready = func(p *kubemodel.Pod[int]) bool { return !p.Terminating && !slices.Contains(broken, p.Template) }
	w.Template, w.Replicas, w.Recreate = s.Template, s.Replicas, s.Recreate
	w.MaxSurge, w.MaxUnavailable, w.Partition, w.OnDelete = s.MaxSurge, s.MaxUnavailable, s.Partition, s.OnDelete
	w.OrderedReady = !s.Parallel
	w.OldTemplateOnCreate = m.fault == OldTemplateOrdinals
	if s.Kind == v1alpha1.KindStatefulSet && s.OnDelete {
		w.Partition = 0
	}
	if m.first == nil {
		m.first = slices.Clone(s.Nodes)
	}
	w.Nodes = slices.Clone(s.Nodes)
	if m.fault == IgnoreNodeJoins {
		w.Nodes = slices.DeleteFunc(w.Nodes, func(n int) bool { return !slices.Contains(m.first, n) })
	}
	w.Settle(10_000)
	if v := st.Delete; v != nil {
		for _, p := range w.Pods {
			if (s.Kind == v1alpha1.KindDeployment && p.Template == v.Template) || (s.Kind != v1alpha1.KindDeployment && p.Slot == v.Slot) {
				w.Remove(p)
				break
			}
		}
		w.Settle(10_000)
	}
}

// Observe is the model's observation.
func (m *Model) Observe() Observation {
	o := Observation{Pods: map[int]int{}, Revisions: maps.Clone(m.w.Revisions), Current: -1}
	for _, p := range m.w.Pods {
		o.Pods[p.Template]++
	}
	if m.w.Kind == v1alpha1.KindStatefulSet {
		o.Current = m.w.Current
	}
	return o
}

// Run is a sequence through a model: the observation after each step.
func Run(seq Sequence, fault Fault) []Observation {
	m := NewModel(fault)
	var out []Observation
	for _, st := range seq.Steps {
		m.Apply(st)
		out = append(out, m.Observe())
	}
	return out
}

// Point is one quiescent point of a sequence as kube showed it, and what it covered.
type Point struct {
	Kube Observation
	// Quiescent is false when kube did not settle in time (a difference).
	Quiescent bool
}

// Tally counts the compared points and what they covered.
type Tally struct {
	Sequences, Points, Differences                       int
	TwoTemplates, Partition, OnDelete, Stalled, Returned int
	Ops                                                  map[string]int
	Shapes                                               map[string]int
	Diffs                                                []string
}

// Compare compares kube's points of seq with the model run with fault, adding to t.
func (t *Tally) Compare(seq Sequence, kube []Point, fault Fault) {
	if t.Ops == nil {
		t.Ops, t.Shapes = map[string]int{}, map[string]int{}
	}
	t.Sequences++
	model := Run(seq, fault)
	for i, st := range seq.Steps {
		if i >= len(kube) {
			break
		}
		t.Points++
		t.Ops[st.Op]++
		t.Shapes[st.Spec.Shape()]++
		k, m := kube[i], model[i]
		if !k.Quiescent || !k.Kube.Equal(m) {
			t.Differences++
			what := "kube " + k.Kube.String()
			if !k.Quiescent {
				what = "kube never settled: " + what
			}
			t.Diffs = append(t.Diffs, fmt.Sprintf("%s step %d (%s, %s, spec %+v): %s; model %s", seq.Name, i, st.Op, st.Spec.Shape(), st.Spec, what, m))
		}
		withPods := 0
		for _, n := range k.Kube.Pods {
			if n > 0 {
				withPods++
			}
		}
		if withPods >= 2 {
			t.TwoTemplates++
		}
		if st.Spec.Kind == v1alpha1.KindStatefulSet && !st.Spec.OnDelete && st.Spec.Partition > 0 {
			t.Partition++
		}
		if st.Spec.OnDelete {
			t.OnDelete++
		}
		if slices.Contains(st.Spec.Broken, st.Spec.Template) && k.Kube.Pods[st.Spec.Template] > 0 {
			t.Stalled++
		}
		if st.Op == "return" {
			t.Returned++
		}
	}
}

// Histogram renders a count map, sorted by key.
func Histogram(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// Trace renders a sequence step by step: the operation, kube's point and the model's.
func Trace(seq Sequence, kube []Point, fault Fault) string {
	var b strings.Builder
	model := Run(seq, fault)
	for i, st := range seq.Steps {
		k := "-"
		if i < len(kube) {
			k = kube[i].Kube.String()
		}
		fmt.Fprintf(&b, "%s %2d %-11s %+v\n   kube  %s\n   model %s\n", seq.Name, i, st.Op, st.Spec, k, model[i])
		if st.Delete != nil {
			fmt.Fprintf(&b, "   delete %+v\n", *st.Delete)
		}
	}
	return b.String()
}
