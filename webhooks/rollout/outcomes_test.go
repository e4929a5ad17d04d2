package rollout

import (
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestOutcomeExplorerFindings holds, through the real decision, each hole the outcome
// explorer (model_test.go: I7 counted from the pods, I2 between first pods, W1) found in
// the rollout guard; each case once passed.
func TestOutcomeExplorerFindings(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	B4 := template("B", "4")
	sts, dep := v1alpha1.KindStatefulSet, v1alpha1.KindDeployment
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	settle := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: time.Minute}}, ArgsMatchReplicas: flags}
	deny := []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: 30 * time.Minute}, Action: v1alpha1.WindowDeny}}
	policy := func(windows []v1alpha1.Window) []v1alpha1.RolloutPolicy {
		return []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: settle, Windows: windows}}}
	}
	// A StatefulSet of 3 under a partition of 1: ordinal 0 keeps A, 1 and 2 run B.
	canary := func(partition int32) workload.Rollout {
		return workload.Rollout{Mixed: true, Progress: workload.Progress{Kind: sts, Updated: 2, Target: 3 - partition, Available: 3, Want: 3}}
	}
	pausedRolling := workload.Rollout{Paused: true, Held: true, InProgress: true, Mixed: true,
		Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	resumed := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 4, Available: 2, Want: 4, Total: 3}}
	onDelete := workload.Rollout{OnDelete: true, Held: true}
	// The history the cache shows: A with one pod, B with two.
	two := history.History{Revisions: []history.Revision{running(rev(1, A, time.Hour, 1), 1), running(rev(2, B, 10*time.Minute, 2), 2)}}

	cases := []struct {
		name      string
		op        admissionv1.Operation
		old, obj  *workload.Workload
		history   history.History
		journal   *journal.Journal
		windows   []v1alpha1.Window
		wantRule  string // "" admitted
		wantInMsg string
	}{{
		// A rollout finished under a partition leaves its canary's old template below it: a
		// third template waits for the partition to be lowered (the pods below it are read
		// though the rollout is "finished": history.Read).
		name: "a third template on a partitioned canary", op: admissionv1.Update,
		old: wl(sts, 3, B, canary(1)), obj: wl(sts, 3, C, canary(1)), history: two,
		wantRule: RuleSettle, wantInMsg: "lower the partition",
	}, {
		// The cache shows only one revision with pods (it lags the controller); the stored
		// object's status counts pods on its template beside pods on another.
		name: "the status witnesses two templates the cache does not show yet", op: admissionv1.Update,
		old: wl(dep, 3, B, resumed), obj: wl(dep, 3, C, resumed),
		history: history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 3), 3)}},
		// B's rollout counts as finished (a scale's keeps its revision's): I1 lets C start.
		journal:  jr(0, jrev(A, time.Hour, 10*time.Minute, 50*time.Minute), jrev(B, 10*time.Minute, 0, 5*time.Minute)),
		wantRule: RuleSettle, wantInMsg: "the status counts",
	}, {
		// A flag-following scale that resumes in the same request starts the held template's
		// pods: it is no scale to the revision rules (I4 does not make it a non-start), and a
		// Deny window holds it.
		name: "a scale that also resumes is held by a Deny window", op: admissionv1.Update,
		old: wl(dep, 3, B, pausedRolling), obj: wl(dep, 4, B4, resumed), windows: deny,
		history:  history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, time.Minute, 1), 1)}},
		wantRule: RuleWindow,
	}, {
		// A resume rolls out what was staged while paused: a Deny window holds it as it holds
		// a template change.
		name: "a resume inside a Deny window", op: admissionv1.Update,
		old: wl(dep, 3, B, pausedRolling), obj: wl(dep, 3, B, resumed), windows: deny,
		history:  history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, time.Minute, 1), 1)}},
		wantRule: RuleWindow,
	}, {
		// Created OnDelete over the pods of two templates it adopts: kube creates every
		// missing or replaced pod from its template, a third.
		name: "a held CREATE over two templates", op: admissionv1.Create,
		obj: wl(sts, 3, C, onDelete), history: two,
		wantRule: RuleSettle, wantInMsg: "created held",
	}, {
		// Switched to OnDelete moments ago (its status not yet of that generation) and edited
		// again: the cache shows no pod of the replaced template, but the controller may have
		// made some before the switch; A still has pods.
		name: "a staged edit beside a status of an older generation waits", op: admissionv1.Update,
		old:      wl(sts, 3, B, workload.Rollout{OnDelete: true, Held: true, Progress: workload.Progress{Kind: sts, Updated: 0, Target: 3, Want: 3, Unobserved: 7}}),
		obj:      wl(sts, 3, C, onDelete),
		history:  history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 3), 3), rev(2, B, time.Minute, 0)}},
		wantRule: RuleSettle, wantInMsg: "retry in a few seconds",
	}, {
		name: "a held CREATE with the template its pods run", op: admissionv1.Create,
		obj: wl(sts, 3, B, onDelete), history: two,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Operation: c.op, Old: c.old, New: c.obj, History: c.history, Journal: c.journal, Now: now, Policies: policy(c.windows)}
			if c.op == admissionv1.Update {
				in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
			}
			if !ReadsRevisions(in) {
				t.Fatalf("the handler would not read the history for this request")
			}
			d, err := Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			var got *decision.Violation
			for i := range d.Violations {
				if d.Violations[i].Rule == c.wantRule {
					got = &d.Violations[i]
				}
			}
			switch {
			case c.wantRule == "" && len(d.Violations) > 0:
				t.Errorf("refused: %v", d.Violations)
			case c.wantRule != "" && got == nil:
				t.Errorf("admitted without a %s finding: %v", c.wantRule, d.Violations)
			case got != nil && !strings.Contains(got.Message, c.wantInMsg):
				t.Errorf("the refusal does not say %q: %s", c.wantInMsg, got.Message)
			}
		})
	}
}

// TestLoweringAPartitionIsAStart: lowering a StatefulSet's partition below ordinals that run
// another revision restarts a rollout the journal calls finished; the fleet limit, the
// shared budget and the windows count it (Decision.Starts).
func TestLoweringAPartitionIsAStart(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	sts := v1alpha1.KindStatefulSet
	canary := workload.Rollout{Mixed: true, Progress: workload.Progress{Kind: sts, Updated: 2, Target: 2, Available: 3, Want: 3}}
	lowered := workload.Rollout{Mixed: true, InProgress: true, Progress: workload.Progress{Kind: sts, Updated: 2, Target: 3, Available: 3, Want: 3}}
	in := Input{Operation: admissionv1.Update, Old: wl(sts, 3, B, canary), New: wl(sts, 3, B, lowered), Now: now,
		History:  history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 1), 1), live(rev(2, B, 10*time.Minute, 2), 2)}},
		Journal:  jr(0, jrev(A, time.Hour, 10*time.Minute, 50*time.Minute), jrev(B, 10*time.Minute, 0, 5*time.Minute)),
		Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}}}},
	}
	if !MayStart(in) || !ReadsRevisions(in) {
		t.Fatalf("lowering the partition is not read as a possible start")
	}
	d, err := Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Starts {
		t.Errorf("lowering the partition below the canary's ordinals is not a start for the fleet: %+v", d)
	}
	if len(d.Violations) > 0 {
		t.Errorf("lowering the partition to finish a finished canary was refused: %v", d.Violations)
	}
	same := in
	same.New = wl(sts, 3, B, canary)
	if lowersPartition(same) {
		t.Errorf("an update that keeps the partition counts as lowering it")
	}
	// A scale up raises the target too, with the partition where it was (fleet explorer,
	// seed 975 of 2,000): its new ordinal replaces no pod, and it held a fleet slot as a
	// restarted rollout.
	full := workload.Rollout{Progress: workload.Progress{Kind: sts, Updated: 2, Target: 2, Available: 2, Want: 2}}
	scaled := workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: sts, Updated: 2, Target: 3, Available: 2, Want: 3}}
	up := in
	up.Old, up.New = wl(sts, 2, B, full), wl(sts, 3, B, scaled)
	if lowersPartition(up) {
		t.Errorf("a scale up from 2 to 3 replicas without a partition counts as lowering it")
	}
	// Replicas 4 with partition 2 (ordinals 2 and 3 on B) to replicas 2 with partition 0
	// in one request: the target stays 2, yet kube replaces ordinals 0 and 1 with B.
	wide := workload.Rollout{Mixed: true, Progress: workload.Progress{Kind: sts, Updated: 2, Target: 2, Available: 4, Want: 4, Total: 4}}
	narrow := workload.Rollout{Mixed: true, InProgress: true, Progress: workload.Progress{Kind: sts, Updated: 2, Target: 2, Available: 4, Want: 2, Total: 4}}
	down := in
	down.Old, down.New = wl(sts, 4, B, wide), wl(sts, 2, B, narrow)
	if !lowersPartition(down) {
		t.Errorf("a partition lowered from 2 to 0 with a scale from 4 to 2 replicas is not read as lowering it")
	}
}

// TestUnobservedGenerationIsNoStall: with no journal, a timeline read from the history dates
// the current revision's progress at its creation; a change its controller has not acted
// on yet must not read as a stalled rollout, which would let any start through.
func TestUnobservedGenerationIsNoStall(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	dep := v1alpha1.KindDeployment
	unobserved := workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3, Unobserved: 4}}
	in := Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, A, unobserved), 4), New: gen(wl(dep, 3, B, unobserved), 5), Now: now,
		TemplateChanged: true,
		History:         history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 3), 3)}},
		Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
			Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: time.Minute}}}}}},
	}
	rs := revisionsOf(in, nil, false)
	if stalled, _ := rs.stalled(in, in.Policies[0].Spec.Rules.Settle); stalled {
		t.Errorf("an unobserved generation reads as a rollout stalled for an hour")
	}
}

// TestUnjournaledFinishedRolloutIsNoStall: a Deployment whose rollout finished an hour ago
// and which has since lost a pod (an eviction) reads, with no journal or a retired one (it
// was just relabelled back into the selection), from the history: its revision dated at
// its creation and its status InProgress. That is no stalled rollout: an edit is refused
// as a start while it rolls (settle), never passed as the fix of a stall, which the fleet
// limit, the shared budget and the windows let through (fleet explorer seeds 2946, 3656,
// 6801).
func TestUnjournaledFinishedRolloutIsNoStall(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	dep := v1alpha1.KindDeployment
	lostOne := workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 2, Want: 3, Total: 3}}
	settle := &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: time.Minute}}
	sumA, err := workload.Fingerprint(A)
	if err != nil {
		t.Fatal(err)
	}
	retired := &journal.Journal{UID: "uid", Deleted: ptr.To(now.Add(-time.Minute)),
		Revisions: []journal.Revision{{Template: sumA, Since: now.Add(-time.Hour), Progressed: now.Add(-time.Hour), Finished: ptr.To(now.Add(-50 * time.Minute))}}}
	for name, j := range map[string]*journal.Journal{"no journal": nil, "a retired journal": retired} {
		in := Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, A, lostOne), 4), New: gen(wl(dep, 3, B, lostOne), 5), Now: now,
			TemplateChanged: true, Journal: j,
			History: history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 3)}},
			Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
				Mode: v1alpha1.ModeEnforce, Rules: v1alpha1.RolloutRules{Settle: settle}}}},
		}
		rs := revisionsOf(in, nil, false)
		if stalled, _ := rs.stalled(in, settle); stalled {
			t.Errorf("%s: a finished rollout that lost a pod reads as stalled for an hour", name)
		}
		d, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		if d.Action() != decision.Deny {
			t.Errorf("%s: the edit was admitted (%v), want refused while the Deployment rolls", name, d.Violations)
		}
	}
}

// TestRecreateIsNeverTheFixOfAStall: a Deployment re-created after an orphaning delete
// adopts the ReplicaSets left behind, and no journal may record them. A rollout left by an
// orphaning delete stood still while nothing owned it, as a paused one does: a re-create
// with a new template over it is refused whatever the pods' idle time (it is no fix of a
// stalled rollout), and the way out the refusal names, the template it had, passes.
func TestRecreateIsNeverTheFixOfAStall(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	settle := &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: time.Minute}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Mode: v1alpha1.ModeEnforce, Rules: v1alpha1.RolloutRules{Settle: settle}}}}
	create := func(tmpl *corev1.PodTemplateSpec, activity time.Time) Decision {
		h := history.History{LastActivity: activity, Revisions: []history.Revision{
			live(rev(1, A, 2*time.Hour, 2), 2), live(rev(2, B, time.Hour, 1), 2)}}
		d, err := Decide(Input{Operation: admissionv1.Create, New: gen(wl(dep, 3, tmpl, workload.Rollout{}), 1), Now: now, History: h, Policies: policies})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for name, activity := range map[string]time.Time{"a pod replaced 10s ago": now.Add(-10 * time.Second), "no pod activity for an hour": {}} {
		if d := create(C, activity); d.Action() != decision.Deny {
			t.Errorf("%s: a re-create with a new template over an unfinished rollout was admitted: %v", name, d.Violations)
		} else if msg := d.Violations[0].Message; !strings.Contains(msg, "create it with the pod template it had") {
			t.Errorf("%s: the refusal does not name the way out: %q", name, msg)
		}
		if d := create(B, activity); d.Action() != decision.Allow {
			t.Errorf("%s: the re-create with the template it had was refused: %v", name, d.Violations)
		}
	}
}
