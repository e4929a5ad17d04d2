package controller

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

func TestRolloutPolicyStatus(t *testing.T) {
	tenants := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "tenant"}}
	cp := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kube-apiserver"}}
	ns := map[string]map[string]string{"tenant-a": {"tier": "tenant"}, "tenant-b": {"tier": "tenant"}, "infra": {"tier": "infra"}}
	w := func(kind v1alpha1.WorkloadKind, namespace string, labels map[string]string) labelled {
		return labelled{kind, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: labels}}}
	}
	workloads := []labelled{
		w(v1alpha1.KindDeployment, "tenant-a", map[string]string{"app": "kube-apiserver"}),
		w(v1alpha1.KindDeployment, "tenant-b", map[string]string{"app": "kube-apiserver"}),
		w(v1alpha1.KindStatefulSet, "tenant-b", map[string]string{"app": "kube-apiserver"}),
		w(v1alpha1.KindDeployment, "infra", map[string]string{"app": "kube-apiserver"}),
		w(v1alpha1.KindDaemonSet, "tenant-a", map[string]string{"app": "agent"}),
	}
	cases := map[string]struct {
		targets         v1alpha1.WorkloadTargets
		suspend         bool
		matched         int32
		status          metav1.ConditionStatus
		reasonWant      string
		messageContains string
	}{
		"counts what the targets select": {targets: v1alpha1.WorkloadTargets{NamespaceSelector: tenants, Selector: cp},
			matched: 3, status: metav1.ConditionTrue, reasonWant: v1alpha1.ReasonValid},
		"kinds narrow the count": {targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}, NamespaceSelector: tenants, Selector: cp},
			matched: 2, status: metav1.ConditionTrue, reasonWant: v1alpha1.ReasonValid},
		"empty targets select everything": {matched: 5, status: metav1.ConditionTrue, reasonWant: v1alpha1.ReasonValid},
		"an invalid selector is not Ready and counts nothing": {targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}},
			matched: 0, status: metav1.ConditionFalse, reasonWant: v1alpha1.ReasonInvalidSelector, messageContains: "spec.targets.selector"},
		"a suspended policy still counts": {targets: v1alpha1.WorkloadTargets{Selector: cp}, suspend: true,
			matched: 4, status: metav1.ConditionFalse, reasonWant: v1alpha1.ReasonSuspended},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 4},
				Spec: v1alpha1.RolloutPolicySpec{Targets: tc.targets, Suspend: tc.suspend}}
			for _, m := range []*policy.Matcher{nil, policy.NewMatcher()} {
				got, selected := rolloutPolicyStatus(m, p, workloads, ns)
				if got.WorkloadsMatched != tc.matched || got.ObservedGeneration != 4 || len(selected) != int(tc.matched) {
					t.Errorf("matched %d (%d selected) at generation %d, want %d at 4", got.WorkloadsMatched, len(selected), got.ObservedGeneration, tc.matched)
				}
				c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReady)
				if c == nil || c.Status != tc.status || c.Reason != tc.reasonWant || c.ObservedGeneration != 4 ||
					!strings.Contains(c.Message, tc.messageContains) {
					t.Errorf("Ready = %+v, want %s %s", c, tc.status, tc.reasonWant)
				}
			}
		})
	}
}

func TestRolloutPolicyStatusKeepsTransitionTimes(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "the policy is in force", ObservedGeneration: 1, LastTransitionTime: then}}
	got, _ := rolloutPolicyStatus(nil, p, nil, nil)
	if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReady); c == nil || !c.LastTransitionTime.Equal(&then) || c.ObservedGeneration != 2 {
		t.Errorf("Ready = %+v, want the old transition time at generation 2", c)
	}
	if p.Status.Conditions[0].ObservedGeneration != 1 {
		t.Error("the policy's own status must not be written")
	}
}

func TestDisruptionPolicyConditions(t *testing.T) {
	invalid := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents", Generation: 3}}
	if c := disruptionPolicyReady(p); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonValid || c.ObservedGeneration != 3 {
		t.Errorf("valid policy: %+v", c)
	}
	p.Spec.Targets.NamespaceSelector = invalid
	p.Spec.Suspend = true
	if c := disruptionPolicyReady(p); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonInvalidSelector ||
		!strings.Contains(c.Message, "spec.targets.namespaceSelector") {
		t.Errorf("an invalid selector outranks suspension: %+v", c)
	}
	p.Spec.Targets.NamespaceSelector = nil
	if c := disruptionPolicyReady(p); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonSuspended {
		t.Errorf("suspended policy: %+v", c)
	}

	if c := pdbConflict(p, 0, ""); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNoConflict {
		t.Errorf("no conflict: %+v", c)
	}
	if c := pdbConflict(p, 2, "PodDisruptionBudget kube-system/mine already covers the pods of DaemonSet agent"); c.Status != metav1.ConditionTrue ||
		c.Reason != v1alpha1.ReasonConflict || !strings.Contains(c.Message, "2 selected workloads") || !strings.Contains(c.Message, "kube-system/mine") {
		t.Errorf("conflicts: %+v", c)
	}
	if c := floorWeakened(p, 0, ""); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonFloorHeld {
		t.Errorf("no weaker PDB: %+v", c)
	}
	if c := floorWeakened(p, 1, "PodDisruptionBudget kube-system/all already covers the pods of DaemonSet agent and allows 6 of its 6 pods down"); c.Status != metav1.ConditionTrue ||
		c.Reason != v1alpha1.ReasonWeakerPDB || !strings.Contains(c.Message, "1 selected workloads") || !strings.Contains(c.Message, "kube-system/all") {
		t.Errorf("weakened: %+v", c)
	}
}

// TestWritersFighting: the condition is False with no fight, and True naming the number of
// fighting workloads, the newest and both its writers.
func TestWritersFighting(t *testing.T) {
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "control-planes", Generation: 3}}
	c := writersFighting(p, nil)
	if c.Type != v1alpha1.ConditionWritersFighting || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonOneWriter || c.ObservedGeneration != 3 {
		t.Errorf("no fight: %+v", c)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	older := fight{workload: workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "kube-apiserver"},
		Fight: journal.Fight{First: "operator-a", Second: "gitops-b", At: t0}}
	newer := fight{workload: workload.Ref{Kind: v1alpha1.KindStatefulSet, Namespace: "tenant-b", Name: "etcd"},
		Fight: journal.Fight{First: "etcd-operator", Second: "manager", At: t0.Add(time.Minute)}}
	c = writersFighting(p, []fight{older, newer})
	want := `2 selected workloads have two writers alternating their templates within revertWindow; newest: StatefulSet tenant-b/etcd, by field managers "etcd-operator" then "manager"`
	if c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonAlternating || c.Message != want {
		t.Errorf("fights: %+v\nwant message %s", c, want)
	}
}
