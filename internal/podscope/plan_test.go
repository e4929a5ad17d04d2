package podscope

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func selector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func TestPlanSharesWatchesByKey(t *testing.T) {
	in := []struct {
		ns  string
		sel *metav1.LabelSelector
	}{
		{"tenant-1", matchLabels("app", "kube-apiserver")},
		{"tenant-2", matchLabels("app", "kube-apiserver")},
		{"tenant-2", matchLabels("app", "konnectivity-server", "tier", "control-plane")},
		// tier is required by fewer selectors than app: the watch of app takes it.
		{"tenant-3", matchLabels("app", "etcd", "tier", "control-plane")},
		// No app: its only key is k8s-app.
		{"kube-system", matchLabels("k8s-app", "konnectivity-agent")},
		{"kube-system", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"kiam-server", "kiam-agent"}}}}},
		// Several requirements on one key, the first without values: the values of the others.
		{"tenant-4", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpExists},
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"scheduler"}}}}},
		// Requires no value of any key: its namespace is watched.
		{"odd", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "serving", Operator: metav1.LabelSelectorOpExists}}}},
	}
	var guarded []Guarded
	for _, g := range in {
		guarded = append(guarded, Guarded{Namespace: g.ns, Selector: selector(t, g.sel)})
	}
	got := Plan(guarded)
	want := []Spec{
		{Key: "app", Values: []string{"etcd", "konnectivity-server", "kube-apiserver", "scheduler"}},
		{Key: "k8s-app", Values: []string{"kiam-agent", "kiam-server", "konnectivity-agent"}},
		{Namespace: "odd"},
	}
	if !slices.EqualFunc(got, want, Spec.Equal) {
		t.Fatalf("Plan = %v, want %v", got, want)
	}
	// Every guarded selector is covered by a watch of the plan, in its namespace.
	for _, g := range guarded {
		if !slices.ContainsFunc(got, func(s Spec) bool { return s.Covers(g.Namespace, g.Selector) }) {
			t.Errorf("guarded selector %s in %s is covered by no watch of %v", g.Selector, g.Namespace, got)
		}
	}
	if len(Plan(nil)) != 0 {
		t.Errorf("no guarded workload: want no watch")
	}
}

func TestCovers(t *testing.T) {
	app := Spec{Key: "app", Values: []string{"a", "b"}}
	ns := Spec{Namespace: "kube-system"}
	cases := []struct {
		name string
		spec Spec
		ns   string
		sel  labels.Selector
		want bool
	}{
		{"a value it selects", app, "x", selector(t, matchLabels("app", "a", "tier", "t")), true},
		{"a value it does not select", app, "x", selector(t, matchLabels("app", "c")), false},
		{"another key", app, "x", selector(t, matchLabels("tier", "t")), false},
		{"In within its values", app, "x", selector(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}), true},
		{"In beyond its values", app, "x", selector(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "c"}}}}), false},
		{"NotIn says nothing of the pods' values", app, "x", selector(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"c"}}}}), false},
		{"Exists says nothing of the pods' values", app, "x", selector(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpExists}}}), false},
		{"no selector", app, "x", nil, false},
		{"everything", app, "x", labels.Everything(), false},
		{"a namespace's watch, its namespace", ns, "kube-system", nil, true},
		{"a namespace's watch, another", ns, "default", selector(t, matchLabels("app", "a")), false},
	}
	for _, c := range cases {
		if got := c.spec.Covers(c.ns, c.sel); got != c.want {
			t.Errorf("%s: %v covers %v in %s = %v, want %v", c.name, c.spec, c.sel, c.ns, got, c.want)
		}
	}
}

func TestPlanPastItsBoundsWatchesEveryPod(t *testing.T) {
	var many []Guarded
	for i := range MaxNamespaceWatches + 1 {
		many = append(many, Guarded{Namespace: fmt.Sprintf("ns-%d", i), Selector: labels.Everything()})
	}
	long := []Guarded{}
	for i := range MaxSelectorBytes / 8 {
		long = append(long, Guarded{Namespace: "x", Selector: selector(t, matchLabels("app", fmt.Sprintf("app-%05d", i)))})
	}
	for name, g := range map[string][]Guarded{"namespaces": many, "values": long} {
		got := Plan(g)
		if len(got) != 1 || !got[0].Equal(Spec{}) {
			t.Errorf("%s past the bounds: Plan = %v, want every pod", name, got)
			continue
		}
		if !got[0].Covers("any", nil) || got[0].Name() != "cluster" {
			t.Errorf("%s: the watch of every pod covers every read", name)
		}
	}
}
