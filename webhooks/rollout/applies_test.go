package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestApplies: a policy applies to a change when it selects the new object or the old one
// (a relabel out of its selection stays its business), never when suspended or when its
// selector cannot be evaluated (it then selects nothing; its status says so).
func TestApplies(t *testing.T) {
	in := func(oldLabels, newLabels map[string]string) Input {
		i := Input{New: &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "t", Name: "w"}, Labels: newLabels}}
		if oldLabels != nil {
			i.Old = &workload.Workload{Ref: i.New.Ref, Labels: oldLabels}
		}
		return i
	}
	policy := func(sel *metav1.LabelSelector, suspend bool) *v1alpha1.RolloutPolicy {
		return &v1alpha1.RolloutPolicy{Spec: v1alpha1.RolloutPolicySpec{Suspend: suspend, Targets: v1alpha1.WorkloadTargets{Selector: sel}}}
	}
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kas"}}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	kas, other := map[string]string{"app": "kas"}, map[string]string{"app": "other"}
	for name, c := range map[string]struct {
		p    *v1alpha1.RolloutPolicy
		in   Input
		want bool
	}{
		"selects the new object":       {policy(app, false), in(nil, kas), true},
		"selected the old object only": {policy(app, false), in(kas, other), true},
		"selects neither":              {policy(app, false), in(other, other), false},
		"suspended":                    {policy(app, true), in(kas, kas), false},
		"a selector that cannot be evaluated selects nothing": {policy(bad, false), in(nil, other), false},
	} {
		if got := Applies(c.p, c.in); got != c.want {
			t.Errorf("%s: Applies = %t, want %t", name, got, c.want)
		}
	}
}
