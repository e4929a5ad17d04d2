package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// template returns a pod template identified by its image tag, running konnectivity-server
// with --server-count=serverCount.
func template(tag string, serverCount string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kas"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-apiserver", Image: "kube-apiserver:" + tag},
			{Name: "konnectivity-server", Image: "konnectivity:1", Args: []string{"--server-count=" + serverCount}},
		}},
	}
}

func wl(kind v1alpha1.WorkloadKind, replicas int32, t *corev1.PodTemplateSpec, r workload.Rollout) *workload.Workload {
	w := &workload.Workload{Ref: workload.Ref{Kind: kind, Namespace: "tenant-a", Name: "kube-apiserver"}, Template: workload.FromSpec(t, ""), Rollout: r, Expected: replicas}
	if kind != v1alpha1.KindDaemonSet {
		w.Replicas = ptr.To(replicas)
	}
	return w
}

// rev is a revision created ago before now, with serving available pods; a hash label is
// added as kube's controllers do, which comparisons must ignore.
func rev(n int64, t *corev1.PodTemplateSpec, ago time.Duration, serving int32) history.Revision {
	c := t.DeepCopy()
	c.Labels[appsv1PodTemplateHash] = "h" + t.Spec.Containers[0].Image
	return history.Revision{Name: "rev-" + c.Spec.Containers[0].Image, Number: n, Template: workload.FromSpec(c, ""), Created: now.Add(-ago), Serving: serving}
}

const appsv1PodTemplateHash = "pod-template-hash"

func TestDecideRolloutRules(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	done := workload.Rollout{}
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: v1alpha1.KindDeployment, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	// starting is a rollout whose new template has no pods yet: one template has live pods.
	starting := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: v1alpha1.KindDeployment, Updated: 0, Target: 3, Available: 3, Want: 3, Total: 3}}
	rules := v1alpha1.RolloutRules{
		Settle:            &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		MinInterval:       &metav1.Duration{Duration: 30 * time.Second},
		RevertWindow:      &metav1.Duration{Duration: 10 * time.Minute},
		ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}},
	}
	only := func(mut func(r *v1alpha1.RolloutRules)) v1alpha1.RolloutRules {
		r := v1alpha1.RolloutRules{}
		mut(&r)
		return r
	}
	settleOnly := only(func(r *v1alpha1.RolloutRules) { r.Settle = rules.Settle })
	intervalOnly := only(func(r *v1alpha1.RolloutRules) { r.MinInterval = rules.MinInterval })
	revertOnly := only(func(r *v1alpha1.RolloutRules) { r.RevertWindow = rules.RevertWindow })

	dep := v1alpha1.KindDeployment
	cases := map[string]struct {
		kind       v1alpha1.WorkloadKind
		rules      v1alpha1.RolloutRules
		old, obj   *workload.Workload
		history    history.History
		wantRules  []string
		wantAction decision.Action
	}{
		"settle: change while rolling out is denied": {
			rules: settleOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, C, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 20*time.Second, 1)}, LastActivity: now.Add(-2 * time.Second)},
			wantRules: []string{RuleSettle},
		},
		"settle: change after the rollout completed is allowed": {
			rules: settleOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, C, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 20*time.Second, 3)}},
		},
		"settle: metadata-only update while rolling out is allowed": {
			rules: settleOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, B, rolling),
		},
		"settle: rollback to the serving revision is allowed": {
			rules: settleOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, A, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 20*time.Second, 1)}, LastActivity: now},
		},
		"settle: rollback before the current revision reached the cache is allowed": {
			rules: settleOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, A, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 3)}, LastActivity: now},
		},
		"settle: going back to a revision with no pods left is not a rollback": {
			rules: settleOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, A, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 20*time.Second, 1)}, LastActivity: now},
			wantRules: []string{RuleSettle},
		},
		"settle: a Deployment past its progress deadline takes a fix": {
			rules: settleOnly, old: wl(dep, 3, B, workload.Rollout{InProgress: true, Mixed: true, DeadlineExceeded: true, ProgressDeadline: 10 * time.Minute}), obj: wl(dep, 3, C, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 11*time.Minute, 0)}, LastActivity: now.Add(-11 * time.Minute)},
		},
		"settle: a StatefulSet with no pod activity for stallAfter takes a fix": {
			rules: settleOnly, old: wl(v1alpha1.KindStatefulSet, 3, B, rolling), obj: wl(v1alpha1.KindStatefulSet, 3, C, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 10*time.Minute, 0)}, LastActivity: now.Add(-6 * time.Minute)},
		},
		"settle: a DaemonSet with recent pod activity is not stalled": {
			rules: settleOnly, old: wl(v1alpha1.KindDaemonSet, 0, B, rolling), obj: wl(v1alpha1.KindDaemonSet, 0, C, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 10*time.Minute, 0)}, LastActivity: now.Add(-4 * time.Minute)},
			wantRules: []string{RuleSettle},
		},
		"settle: a DaemonSet with no pod activity for stallAfter takes a fix": {
			rules: settleOnly, old: wl(v1alpha1.KindDaemonSet, 0, B, rolling), obj: wl(v1alpha1.KindDaemonSet, 0, C, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 10*time.Minute, 0)}, LastActivity: now.Add(-5 * time.Minute)},
		},
		"settle: a rollout just created counts as activity": {
			rules: settleOnly, old: wl(v1alpha1.KindDaemonSet, 0, B, rolling), obj: wl(v1alpha1.KindDaemonSet, 0, C, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, time.Minute, 0)}, LastActivity: now.Add(-time.Hour)},
			wantRules: []string{RuleSettle},
		},
		"settle: a paused Deployment takes edits": {
			rules: settleOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, C, workload.Rollout{Paused: true, Held: true}),
		},
		"settle: an OnDelete StatefulSet takes edits": {
			rules: settleOnly, old: wl(v1alpha1.KindStatefulSet, 3, B, workload.Rollout{InProgress: true, OnDelete: true}),
			obj: wl(v1alpha1.KindStatefulSet, 3, C, workload.Rollout{OnDelete: true, Held: true}),
		},
		"settle: a partitioned StatefulSet whose pods above the partition are updated is done": {
			// statefulSetRollout reports InProgress false once the partition's share is updated.
			rules: settleOnly, old: wl(v1alpha1.KindStatefulSet, 3, B, done), obj: wl(v1alpha1.KindStatefulSet, 3, C, done),
		},
		"settle: a replica-driven flag change while rolling out is a scale": {
			rules: only(func(r *v1alpha1.RolloutRules) { r.Settle = rules.Settle; r.ArgsMatchReplicas = rules.ArgsMatchReplicas }),
			old:   wl(dep, 3, B, starting), obj: wl(dep, 5, template("B", "5"), done),
		},
		"settle: a replica-driven flag change while two templates have pods is one more (I7)": {
			rules: only(func(r *v1alpha1.RolloutRules) { r.Settle = rules.Settle; r.ArgsMatchReplicas = rules.ArgsMatchReplicas }),
			old:   wl(dep, 3, B, rolling), obj: wl(dep, 5, template("B", "5"), done),
			// The cache shows A's pods; the status counts B's beside them.
			history:   history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2)}},
			wantRules: []string{RuleSettle},
		},
		"settle: a flag change without a replicas change is a revision": {
			rules: only(func(r *v1alpha1.RolloutRules) { r.Settle = rules.Settle; r.ArgsMatchReplicas = rules.ArgsMatchReplicas }),
			old:   wl(dep, 3, B, rolling), obj: wl(dep, 3, template("B", "5"), done),
			wantRules: []string{RuleArgsMatchReplicas, RuleSettle},
		},
		"minInterval: a revision soon after the last is denied": {
			rules: intervalOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, C, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 10*time.Second, 3)}},
			wantRules: []string{RuleMinInterval},
		},
		"minInterval: a revision after the interval is allowed": {
			rules: intervalOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, C, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 31*time.Second, 3)}},
		},
		"minInterval: a scale is not a revision": {
			rules: only(func(r *v1alpha1.RolloutRules) {
				r.MinInterval = rules.MinInterval
				r.ArgsMatchReplicas = rules.ArgsMatchReplicas
			}),
			old: wl(dep, 3, B, done), obj: wl(dep, 4, template("B", "4"), done),
			history: history.History{Revisions: []history.Revision{rev(2, B, time.Second, 3)}},
		},
		"minInterval: a template neither the journal nor the history knows became current now": {
			rules: intervalOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, C, done),
			wantRules: []string{RuleMinInterval},
		},
		"revertWindow: A→B→A after B completed is flapping": {
			rules: revertOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, A, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 2*time.Minute, 3)}},
			wantRules: []string{RuleRevertWindow},
		},
		"revertWindow: A→B→A after the window is allowed": {
			rules: revertOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, A, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 11*time.Minute, 3)}},
		},
		"revertWindow: back to A while B rolls out and A serves is a rollback": {
			rules: revertOnly, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, A, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 5*time.Second, 1)}, LastActivity: now},
		},
		"revertWindow: back from a stalled B is allowed": {
			rules: revertOnly, old: wl(dep, 3, B, workload.Rollout{InProgress: true, DeadlineExceeded: true, ProgressDeadline: 10 * time.Minute}), obj: wl(dep, 3, A, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 5*time.Minute, 0)}},
		},
		"revertWindow: measured from the successor of the reverted revision": {
			// A (1h) → B (9m) → C (1m): going back to A is measured from B's creation.
			rules: revertOnly, old: wl(dep, 3, C, done), obj: wl(dep, 3, A, done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 9*time.Minute, 0), rev(3, C, time.Minute, 3)}},
			wantRules: []string{RuleRevertWindow},
		},
		"revertWindow: B again soon after rolling back from B to a long-lived A is flapping": {
			// A (rev 1, 30 days) → B (rev 2, 3m ago) → rollback to A, renumbered 3: A became
			// current no earlier than B's creation, though its ReplicaSet is 30 days old.
			rules: revertOnly, old: wl(dep, 3, A, done), obj: wl(dep, 3, B, done),
			history:   history.History{Revisions: []history.Revision{rev(2, B, 3*time.Minute, 0), rev(3, A, 30*24*time.Hour, 3)}},
			wantRules: []string{RuleRevertWindow},
		},
		"minInterval: a new revision right after a rollback to a long-lived revision": {
			rules: intervalOnly, old: wl(dep, 3, A, done), obj: wl(dep, 3, C, done),
			history:   history.History{Revisions: []history.Revision{rev(2, B, 10*time.Second, 0), rev(3, A, 30*24*time.Hour, 3)}},
			wantRules: []string{RuleMinInterval},
		},
		"revertWindow: a brand-new template is not a revert": {
			rules: revertOnly, old: wl(dep, 3, B, done), obj: wl(dep, 3, C, done),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, time.Second, 3)}},
		},
		"all rules: every violation is reported": {
			rules: rules, old: wl(dep, 3, B, rolling), obj: wl(dep, 3, template("A", "2"), done),
			history:   history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 5*time.Second, 1)}, LastActivity: now},
			wantRules: []string{RuleArgsMatchReplicas, RuleSettle, RuleMinInterval},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.RolloutPolicySpec{Rules: tc.rules}}
			d := decide(t, Input{Operation: admissionv1.Update, Old: tc.old, New: tc.obj, History: tc.history, Now: now,
				User: authenticationv1.UserInfo{Username: "operator"}, Policies: []v1alpha1.RolloutPolicy{p}})
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tc.wantRules, got); diff != "" {
				t.Errorf("violated rules (-want +got):\n%s\n%v", diff, d.Violations)
			}
			if len(tc.wantRules) > 0 && d.Action() != decision.Deny {
				t.Errorf("action = %v, want deny", d.Action())
			}
		})
	}
}

// TestScaleIsNotARevision holds scenarios 11 and 12 to I4: a change whose only template
// difference is --server-count following spec.replicas counts for no revision rule,
// whichever policy holds the flag, in both directions.
func TestScaleIsNotARevision(t *testing.T) {
	B := template("B", "3")
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: v1alpha1.KindDeployment, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	// starting is a rollout whose new template has no pods yet: one template has live pods.
	starting := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: v1alpha1.KindDeployment, Updated: 0, Target: 3, Available: 3, Want: 3, Total: 3}}
	revisions := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "revisions"}, Spec: v1alpha1.RolloutPolicySpec{Rules: v1alpha1.RolloutRules{
		Settle:       &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		MinInterval:  &metav1.Duration{Duration: 30 * time.Second},
		RevertWindow: &metav1.Duration{Duration: 10 * time.Minute}}}}
	serverCount := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "server-count"}, Spec: v1alpha1.RolloutPolicySpec{Rules: v1alpha1.RolloutRules{
		ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}}}
	cases := map[string]struct {
		old, obj  *workload.Workload
		history   history.History
		wantRules []string
	}{
		"11: a coupled scale while rolling out passes when settle and argsMatchReplicas sit in different policies": {
			old: wl(v1alpha1.KindDeployment, 3, B, starting), obj: wl(v1alpha1.KindDeployment, 5, template("B", "5"), starting),
			history: history.History{Revisions: []history.Revision{rev(2, B, 5*time.Second, 2)}, LastActivity: now},
		},
		"12: an emergency scale back 5 -> 3 inside the revert window passes": {
			old: wl(v1alpha1.KindDeployment, 5, template("B", "5"), workload.Rollout{}), obj: wl(v1alpha1.KindDeployment, 3, B, workload.Rollout{}),
			history: history.History{Revisions: []history.Revision{rev(2, B, 3*time.Minute, 0), rev(3, template("B", "5"), time.Minute, 5)}},
		},
		"a flag change without a replicas change is still a revision": {
			old: wl(v1alpha1.KindDeployment, 3, B, rolling), obj: wl(v1alpha1.KindDeployment, 3, template("B", "5"), rolling),
			history:   history.History{Revisions: []history.Revision{rev(2, B, 5*time.Second, 2)}, LastActivity: now},
			wantRules: []string{RuleSettle, RuleMinInterval, RuleArgsMatchReplicas},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decide(t, Input{Operation: admissionv1.Update, Old: tc.old, New: tc.obj, History: tc.history, Now: now,
				User: authenticationv1.UserInfo{Username: "operator"}, Policies: []v1alpha1.RolloutPolicy{revisions, serverCount}})
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tc.wantRules, got); diff != "" {
				t.Errorf("violated rules (-want +got):\n%s\n%v", diff, d.Violations)
			}
		})
	}
}
