package policy

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// TestEachSelectedWalksTheSelectedNamespacesExactly: a namespaceSelector that selects no
// namespace of no labels walks the namespaces it selects alone; any other walks every
// workload. Either way the workloads are exactly those Selects judges selected, one by
// one over every workload: a namespace the labels do not know (created since they were
// read) included, and a selector that selects namespaces without a label included.
func TestEachSelectedWalksTheSelectedNamespacesExactly(t *testing.T) {
	nsLabels := map[string]map[string]string{
		"tenant-a": {"tier": "tenant", "kubernetes.io/metadata.name": "tenant-a"},
		"tenant-b": {"tier": "tenant", "env": "prod", "kubernetes.io/metadata.name": "tenant-b"},
		"system":   {"tier": "system", "kubernetes.io/metadata.name": "system"},
		"bare":     {"kubernetes.io/metadata.name": "bare"},
	}
	builder := fake.NewClientBuilder()
	var all []*appsv1.Deployment
	for i, ns := range []string{"tenant-a", "tenant-b", "system", "bare", "unknown"} {
		for j := range 3 {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d-%d", j),
				Labels: map[string]string{"app": fmt.Sprintf("app-%d", (i+j)%2)}}}
			all = append(all, d)
			builder = builder.WithObjects(d.DeepCopy())
		}
	}
	r := builder.Build()
	m := NewMatcher()
	for name, sel := range map[string]*metav1.LabelSelector{
		"matchLabels":  {MatchLabels: map[string]string{"tier": "tenant"}},
		"In":           {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"tenant", "system"}}}},
		"Exists":       {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}},
		"NotIn":        {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"system"}}}},
		"DoesNotExist": {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}},
		"empty":        {},
		"by name":      {MatchLabels: map[string]string{"kubernetes.io/metadata.name": "system"}},
	} {
		for _, wsel := range []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"app": "app-1"}}} {
			targets := v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}, NamespaceSelector: sel, Selector: wsel}
			var want, got []string
			for _, d := range all {
				if ok, err := m.Selects(targets, v1alpha1.KindDeployment, nsLabels[d.Namespace], d.Labels); err == nil && ok {
					want = append(want, d.Namespace+"/"+d.Name)
				}
			}
			err := EachSelected(context.Background(), r, m, targets, nsLabels, func(_ v1alpha1.WorkloadKind, o client.Object) {
				got = append(got, o.GetNamespace()+"/"+o.GetName())
			})
			slices.Sort(want)
			slices.Sort(got)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s (workloads %v): selected %v (%v), want %v", name, wsel, got, err, want)
			}
		}
	}
}
