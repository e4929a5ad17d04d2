package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// revH is a revision whose pods carry hash, with live pods.
func revH(n int64, t *corev1.PodTemplateSpec, hash string, ago time.Duration, serving, livePods int32) history.Revision {
	c := t.DeepCopy()
	c.Labels[appsv1PodTemplateHash] = hash
	return history.Revision{Name: "rev-" + hash, Number: n, Template: workload.FromSpec(c, ""), Created: now.Add(-ago), Serving: serving, Live: livePods, Pods: livePods}
}

// show decides in and logs the decision.
func show(t *testing.T, name string, in Input) Decision {
	t.Helper()
	d := decide(t, in)
	t.Logf("%s: action=%v starts=%v violations=%v", name, d.Action(), d.Starts, d.Violations)
	return d
}

// Found by review: A@3 -> A@4 (flag-following scale, journal keeps A finished) leaves A@3 and
// A@4 live; pause; edit to C while paused (unjudged); resume before the Deployment
// controller observed the edit: status.updatedReplicas still counts A@4's pods.
func TestRegressionPausedEditResumeStaleUpdated(t *testing.T) {
	A3, A4, C := template("A", "3"), template("A", "4"), template("C", "4")
	dep := v1alpha1.KindDeployment
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		ArgsMatchReplicas: flags, MinInterval: &metav1.Duration{Duration: time.Minute}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	shape, _ := wl(dep, 4, A4, workload.Rollout{}).Template.Shape(flags)
	ja := jrev(A4, time.Hour, 0, 50*time.Minute)
	ja.Shape = shape
	j := jr(10, ja)
	j.Held = true
	h := history.History{Revisions: []history.Revision{revH(1, A3, "a3", time.Hour, 2, 2), revH(2, A4, "a4", time.Minute, 2, 2)}, LastActivity: now}
	stale := workload.Progress{Kind: dep, Updated: 2, Target: 4, Available: 4, Want: 4, Total: 4, Unobserved: 10}
	old := gen(wl(dep, 4, C, workload.Rollout{Paused: true, Held: true, InProgress: true, Mixed: true, Progress: stale}), 10)
	nw := gen(wl(dep, 4, C, workload.Rollout{InProgress: true, Mixed: true, Progress: stale}), 11)
	// step 2 (edit while paused) for the record
	oldP := gen(wl(dep, 4, A4, workload.Rollout{Paused: true, Held: true, InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 2, Target: 4, Available: 4, Want: 4, Total: 4}}), 9)
	show(t, "edit A@4->C while paused", Input{Operation: admissionv1.Update, Old: oldP, New: old, Now: now, Journal: jr(9, ja), History: h, Policies: policies})
	d := show(t, "resume (stale status)", Input{Operation: admissionv1.Update, Old: old, New: nw, Now: now, Journal: j, History: h, Policies: policies})
	if len(d.Violations) == 0 {
		t.Errorf("resume of C admitted while A@3 and A@4 have live pods: third template")
	}
	// control: same resume once the controller observed (updated=0)
	obs := workload.Progress{Kind: dep, Updated: 0, Target: 4, Available: 4, Want: 4, Total: 4}
	old2 := gen(wl(dep, 4, C, workload.Rollout{Paused: true, Held: true, InProgress: true, Mixed: true, Progress: obs}), 10)
	nw2 := gen(wl(dep, 4, C, workload.Rollout{InProgress: true, Mixed: true, Progress: obs}), 11)
	show(t, "control: resume (observed status)", Input{Operation: admissionv1.Update, Old: old2, New: nw2, Now: now, Journal: j, History: h, Policies: policies})
}

// Found by review: a DaemonSet whose rollout to C finished (journal, sticky) and a node whose
// daemon pod cannot run (status: 3 of 4 updated, the cache: only C live).
func TestRegressionDaemonSetMixedForever(t *testing.T) {
	C, D := template("C", "3"), template("D", "3")
	ds := v1alpha1.KindDaemonSet
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	h := history.History{Revisions: []history.Revision{live(rev(1, C, 2*time.Hour, 3), 3)}, LastActivity: now.Add(-time.Hour)}
	j := jr(5, jrev(C, 2*time.Hour, 0, 90*time.Minute))
	j.Kind = ds
	st := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: ds, Updated: 3, Target: 4, Available: 3, Want: 4}}
	d := show(t, "C->D", Input{Operation: admissionv1.Update, Old: gen(wl(ds, 4, C, st), 5), New: gen(wl(ds, 4, D, st), 6), Now: now, Journal: j, History: h, Policies: policies})
	if len(d.Violations) != 0 {
		t.Errorf("refused: only one template has live pods")
	}
}

var _ *journal.Journal

// Found by review: orphan-delete mid-scale (A@3, A@4 live), re-create with C; journal kept
// (Deleted, A finished) or lost.
func TestRegressionRecreateAfterOrphanMidScale(t *testing.T) {
	A3, A4, C := template("A", "3"), template("A", "4"), template("C", "4")
	dep := v1alpha1.KindDeployment
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}, ArgsMatchReplicas: flags}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	shape, _ := wl(dep, 4, A4, workload.Rollout{}).Template.Shape(flags)
	ja := jrev(A4, time.Hour, 0, 50*time.Minute)
	ja.Shape = shape
	h := history.History{Revisions: []history.Revision{revH(1, A3, "a3", time.Hour, 2, 2), revH(2, A4, "a4", time.Minute, 2, 2)}, LastActivity: now}
	for name, j := range map[string]*journal.Journal{"journal kept": deleted(jr(9, ja), 10*time.Second), "journal lost": nil} {
		show(t, name+": create C", Input{Operation: admissionv1.Create, New: wl(dep, 4, C, workload.Rollout{}), Now: now, Journal: j, History: h, Policies: policies})
		show(t, name+": create A@3 (scale back)", Input{Operation: admissionv1.Create, New: wl(dep, 3, A3, workload.Rollout{}), Now: now, Journal: j, History: h, Policies: policies})
	}
}

// Found by review: StatefulSet canary finished under partition 2 (A on 0,1; B on 2; journal B
// finished); partition raised to 3 (held); template B->C (unjudged: held, not OnDelete);
// scale 3->4 with the partition left at 3 before the StatefulSet controller observed the
// edit: kube creates ordinal 3 from C beside A and B.
func TestRegressionPartitionHeldEditScaleUp(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	sts := v1alpha1.KindStatefulSet
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	h := history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, 30*time.Minute, 1), 1)}, LastActivity: now}
	j := jr(11, jrev(A, time.Hour, 30*time.Minute, 50*time.Minute), jrev(B, 30*time.Minute, 0, 20*time.Minute))
	j.Kind, j.Held = sts, true
	canary := workload.Rollout{Mixed: true, Progress: workload.Progress{Kind: sts, Updated: 1, Target: 1, Available: 3, Want: 3}}
	heldR := workload.Rollout{Held: true, Mixed: true, Progress: workload.Progress{Kind: sts, Updated: 1, Target: 0, Available: 3, Want: 3}}
	show(t, "raise partition 2->3", Input{Operation: admissionv1.Update, Old: gen(wl(sts, 3, B, canary), 9), New: gen(wl(sts, 3, B, heldR), 10), Now: now, Journal: jr(9, j.Revisions...), History: h, Policies: policies})
	show(t, "edit B->C while held", Input{Operation: admissionv1.Update, Old: gen(wl(sts, 3, B, heldR), 10), New: gen(wl(sts, 3, C, heldR), 11), Now: now, Journal: jr(10, j.Revisions...), History: h, Policies: policies})
	stale := heldR
	stale.Progress.Unobserved = 11
	up := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: sts, Updated: 1, Target: 1, Available: 3, Want: 4, Unobserved: 12}}
	d := show(t, "scale 3->4 (stale status)", Input{Operation: admissionv1.Update, Old: gen(wl(sts, 3, C, stale), 11), New: gen(wl(sts, 4, C, up), 12), Now: now, Journal: j, History: h, Policies: policies})
	if len(d.Violations) == 0 {
		t.Errorf("scale admitted: ordinal 3 gets C beside A and B")
	}
	obs := heldR
	obs.Progress.Updated = 0
	up2 := up
	up2.Progress.Updated = 0
	show(t, "control: scale 3->4 (observed status)", Input{Operation: admissionv1.Update, Old: gen(wl(sts, 3, C, obs), 11), New: gen(wl(sts, 4, C, up2), 12), Now: now, Journal: j, History: h, Policies: policies})
}

// Found by review: a Deployment's own progressDeadlineSeconds of 1 made kube declare every
// rollout stalled at once, and the stall's way past settle, the windows and the
// third-template check opened at will. kube's verdict counts only when its deadline is at
// least the policy's stallAfter; below it the policy's own clock decides.
func TestTinyProgressDeadlineIsNoStall(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules, Windows: freeze}}}
	// B became current 20 s ago and rolls out: A serves 2 pods, B has 1 (a third template
	// would have pods beside both).
	h := history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, 20*time.Second, 1), 1)}, LastActivity: now}
	progress := workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 3, Want: 3, Total: 3}
	stalledFor := func(deadline, idle time.Duration) Input {
		b := jrev(B, idle, 0, -1)
		b.Available = 1 // the journal saw B's one pod: nothing progressed since
		j := jr(7, jrev(A, time.Hour, idle, 50*time.Minute), b)
		r := workload.Rollout{InProgress: true, Mixed: true, DeadlineExceeded: true, ProgressDeadline: deadline, Progress: progress}
		return Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, B, r), 7), New: gen(wl(dep, 3, C, r), 8),
			Now: now, Journal: j, History: h, Policies: policies}
	}
	rulesOf := func(d Decision) []string {
		var got []string
		for _, v := range d.Violations {
			got = append(got, v.Rule)
		}
		return got
	}
	// The attack: progressDeadlineSeconds 1, kube says "stalled" 20 s into the rollout.
	if got := rulesOf(decide(t, stalledFor(time.Second, 20*time.Second))); !slices.Contains(got, RuleSettle) || !slices.Contains(got, RuleWindow) {
		t.Errorf("a tiny progress deadline's verdict let a new template through: refused by %v, want settle and window", got)
	}
	// A genuine stall: kube's default deadline (600 s, longer than stallAfter) passed.
	if got := rulesOf(decide(t, stalledFor(10*time.Minute, 11*time.Minute))); len(got) != 0 {
		t.Errorf("the fix of a rollout kube declared stalled after 600 s was refused: %v", got)
	}
	// And under the tiny deadline, once the policy's own stallAfter passed without progress.
	if got := rulesOf(decide(t, stalledFor(time.Second, 6*time.Minute))); len(got) != 0 {
		t.Errorf("the fix of a rollout stalled for the policy's stallAfter was refused: %v", got)
	}
}

// Found by review: kube's ProgressDeadlineExceeded is sticky (DeploymentTimedOut,
// pkg/controller/deployment/util/deployment_util.go, answers true while the condition's
// reason is TimedOutReason, until the next progress). progressDeadlineSeconds lowered to
// 1 s, then raised to 600 s, leaves a healthy rollout 20 s old "stalled" under a deadline
// that has not passed. The verdict counts only once holdfast's own record shows no
// progress for the deadline now set.
func TestRaisedProgressDeadlineLeavesNoStall(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	third := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	// A serves 2 pods, B (current) has 1: C would be a third template with pods.
	h := history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, 20*time.Second, 1), 1)}, LastActivity: now}
	progress := workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 3, Want: 3, Total: 3}
	sticky := workload.Rollout{InProgress: true, Mixed: true, DeadlineExceeded: true, ProgressDeadline: 10 * time.Minute, Progress: progress}
	in := func(idle time.Duration, windows []v1alpha1.Window) Input {
		b := jrev(B, idle, 0, -1)
		b.Available = 1
		j := jr(7, jrev(A, time.Hour, idle, 50*time.Minute), b)
		policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: third, Windows: windows}}}
		return Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, B, sticky), 7), New: gen(wl(dep, 3, C, sticky), 8),
			Now: now, Journal: j, History: h, Policies: policies}
	}
	rulesOf := func(d Decision) []string {
		var got []string
		for _, v := range d.Violations {
			got = append(got, v.Rule)
		}
		return got
	}
	// The attack: the sticky verdict 20 s into the rollout opens settle, the window and the
	// third template.
	if got := rulesOf(decide(t, in(20*time.Second, freeze))); !slices.Contains(got, RuleSettle) || !slices.Contains(got, RuleWindow) {
		t.Errorf("a sticky verdict under a raised deadline let a third template through the freeze: refused by %v, want settle and window", got)
	}
	// No progress on record for the deadline now set: the stall is real, its fix passes.
	if got := rulesOf(decide(t, in(11*time.Minute, freeze))); len(got) != 0 {
		t.Errorf("the fix of a rollout with no progress on record for the deadline was refused: %v", got)
	}
}

// Found by the 50,000-sequence run (seeds 13280, 21116, 30007): B rolls out and is stuck
// (its one pod never Ready) beside A's pods, C becomes current and is held (a re-create,
// then OnDelete) before any pod runs it. A held rollout never stalls, C's lift would be a
// third template, and going back to B was no cancel while B's pod did not serve: a
// deadlock. Back to B, when no pod runs C, changes no pod: a cancel.
func TestBackFromATemplateNoPodRuns(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	ds := v1alpha1.KindDaemonSet
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	j := jr(9, jrev(A, time.Hour, 2*time.Minute, 50*time.Minute), jrev(B, 2*time.Minute, time.Minute, -1), jrev(C, time.Minute, 0, -1))
	j.Kind, j.Held = ds, true
	st := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: ds, Updated: 0, Target: 3, Available: 2, Want: 3, Total: 3}}
	onDelete := st
	onDelete.OnDelete, onDelete.Held = true, true
	decideBack := func(bPods int32) Decision {
		h := history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, 2*time.Minute, 0), bPods), rev(3, C, time.Minute, 0)},
			LastActivity: now.Add(-time.Minute)}
		return show(t, "OnDelete C, back to B as RollingUpdate", Input{Operation: admissionv1.Update, Old: gen(wl(ds, 3, C, onDelete), 9),
			New: gen(wl(ds, 3, B, st), 10), Now: now, Journal: j, History: h, Policies: policies})
	}
	if d := decideBack(1); len(d.Violations) != 0 {
		t.Errorf("back to B, whose pod is live, from C that no pod runs was refused: %v", d.Violations)
	}
	// A B without live pods is no cancel: it would be a rollout of its own.
	if d := decideBack(0); len(d.Violations) == 0 {
		t.Error("back to B, which no pod runs either, was admitted as a cancel")
	}
}

// A scale up of an OnDelete StatefulSet whose template no pod runs yet: kube gives the new
// ordinal that template (newVersionedStatefulSetPod), so the scale starts its rollout and
// is judged as a start: the windows hold it, as they hold an edit. Once the template has
// pods, the scale starts nothing.
func TestScaleOfAHeldStatefulSetStartsItsStagedTemplate(t *testing.T) {
	B, C := template("B", "3"), template("C", "3")
	sts := v1alpha1.KindStatefulSet
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules, Windows: freeze}}}
	j := jr(9, jrev(B, time.Hour, 0, 50*time.Minute))
	j.Kind, j.Held = sts, true
	held := workload.Rollout{OnDelete: true, Held: true, Progress: workload.Progress{Kind: sts, Updated: 0, Target: 3, Available: 3, Want: 3, Total: 3}}
	scaleUp := func(cPods int32) Decision {
		h := history.History{Revisions: []history.Revision{live(rev(1, B, time.Hour, 3-cPods), 3-cPods), live(rev(2, C, 10*time.Minute, cPods), cPods)}}
		old := gen(wl(sts, 3, C, held), 9)
		old.Rollout.Progress.Updated = cPods
		return show(t, "OnDelete, 3 → 4", Input{Operation: admissionv1.Update, Old: old, New: gen(wl(sts, 4, C, held), 10),
			Now: now, Journal: j, History: h, Policies: policies})
	}
	if d := scaleUp(0); len(d.Violations) != 1 || d.Violations[0].Rule != RuleWindow || !d.Starts {
		t.Errorf("a scale up that makes the first pod of a staged template in a Deny window: %v (starts %v), want the window's refusal", d.Violations, d.Starts)
	} else if msg := d.Violations[0].Message; strings.Contains(msg, "a scale pass") || !strings.Contains(msg, "staged template") {
		t.Errorf("the refusal of a scale that starts a staged template says a scale passes: %q", msg)
	}
	if d := scaleUp(1); len(d.Violations) != 0 || d.Starts {
		t.Errorf("a scale up of a template that has pods already was judged as a start: %v", d.Violations)
	}
}

// Found by review: spec.ordinals.start changed on an OnDelete StatefulSet with a staged
// template. kube condemns the pods outside the new range and creates the missing ordinals
// from the update revision (updateStatefulSet, newVersionedStatefulSetPod): moved by its
// replicas, every pod is replaced by one of the staged template. Judged as a start, as a
// scale up is; once the template has pods, the renumbering starts nothing.
func TestOrdinalsStartOfAHeldStatefulSetStartsItsStagedTemplate(t *testing.T) {
	B, C := template("B", "3"), template("C", "3")
	sts := v1alpha1.KindStatefulSet
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules, Windows: freeze}}}
	j := jr(9, jrev(B, time.Hour, 0, 50*time.Minute))
	j.Kind, j.Held = sts, true
	held := workload.Rollout{OnDelete: true, Held: true, Progress: workload.Progress{Kind: sts, Updated: 0, Target: 3, Available: 3, Want: 3, Total: 3}}
	renumber := func(cPods int32, start int32) Decision {
		h := history.History{Revisions: []history.Revision{live(rev(1, B, time.Hour, 3-cPods), 3-cPods), live(rev(2, C, 10*time.Minute, cPods), cPods)}}
		old := gen(wl(sts, 3, C, held), 9)
		old.Rollout.Progress.Updated = cPods
		moved := gen(wl(sts, 3, C, held), 10)
		moved.OrdinalStart = start
		return show(t, "OnDelete, ordinals.start 0 → 3", Input{Operation: admissionv1.Update, Old: old, New: moved,
			Now: now, Journal: j, History: h, Policies: policies})
	}
	if d := renumber(0, 3); len(d.Violations) != 1 || d.Violations[0].Rule != RuleWindow || !d.Starts {
		t.Errorf("a renumbering that replaces every pod with the staged template in a Deny window: %v (starts %v), want the window's refusal", d.Violations, d.Starts)
	}
	if d := renumber(1, 3); len(d.Violations) != 0 || d.Starts {
		t.Errorf("a renumbering onto a template that has pods already was judged as a start: %v", d.Violations)
	}
	if d := renumber(0, 0); len(d.Violations) != 0 || d.Starts {
		t.Errorf("an update that keeps ordinals.start was judged as a start: %v", d.Violations)
	}
}

// A StatefulSet re-created held (a partition at its replicas) with a template its adopted
// pods do not run, over fewer pods than its replicas: a created StatefulSet's current
// revision is its update revision (getStatefulSetRevisions), so kube creates the missing
// ordinals from the new template, partition notwithstanding. It is judged as a start
// (here minInterval); over as many pods as its replicas it creates none, and starts nothing.
func TestHeldCreateOverFewerPodsIsAStart(t *testing.T) {
	B, C := template("B", "3"), template("C", "3")
	sts := v1alpha1.KindStatefulSet
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		MinInterval: &metav1.Duration{Duration: time.Minute}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	j := jr(4, jrev(B, 10*time.Second, 0, 5*time.Second))
	j.Kind, j.Deleted = sts, ptr.To(now.Add(-2*time.Second))
	held := workload.Rollout{Held: true, Progress: workload.Progress{Kind: sts, Target: 0, Want: 3}}
	create := func(adopted int32) Decision {
		h := history.History{Revisions: []history.Revision{running(rev(1, B, time.Minute, adopted), adopted)}}
		return show(t, "CREATE held over B", Input{Operation: admissionv1.Create, New: gen(wl(sts, 3, C, held), 1), Now: now, Journal: j, History: h, Policies: policies})
	}
	if d := create(2); len(d.Violations) != 1 || d.Violations[0].Rule != RuleMinInterval {
		t.Errorf("a held CREATE whose missing ordinal gets a new template 10 s after B: %v, want minInterval's refusal", d.Violations)
	}
	if d := create(3); len(d.Violations) != 0 {
		t.Errorf("a held CREATE over as many pods as its replicas creates none, yet was refused: %v", d.Violations)
	}
}
