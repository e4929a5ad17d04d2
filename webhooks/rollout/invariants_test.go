package rollout

import (
	"strings"
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
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// jrev is a journal revision of t that became current since ago, was replaced until ago
// (0: it is current) and finished finished ago (-1: it has not).
func jrev(t *corev1.PodTemplateSpec, since, until, finished time.Duration) journal.Revision {
	sum, _ := workload.FromSpec(t, "").Sum()
	r := journal.Revision{Template: sum, Since: now.Add(-since), Progressed: now.Add(-since)}
	if until > 0 {
		u := now.Add(-until)
		r.Until = &u
	}
	if finished >= 0 {
		f := now.Add(-finished)
		r.Finished = &f
	}
	return r
}

// deleted is j as the leader keeps it once it saw the workload deleted ago.
func deleted(j *journal.Journal, ago time.Duration) *journal.Journal {
	c := *j
	c.Deleted = ptr.To(now.Add(-ago))
	return &c
}

// jr is a journal of the test workload that observed its generation gen.
func jr(gen int64, revs ...journal.Revision) *journal.Journal {
	return &journal.Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "kube-apiserver", Generation: gen, Revisions: revs}
}

func held(w *workload.Workload, gen int64) *workload.Workload {
	w.Rollout.Held, w.Generation = true, gen
	return w
}

func gen(w *workload.Workload, g int64) *workload.Workload {
	w.Generation = g
	return w
}

// TestRevisionInvariants holds scenarios 1–4, 9 and 10 (a held edit resumed, a cache and
// journal behind the request, flips between two revisions, a return to a revision served
// long ago, a re-create after an orphaning delete, a DaemonSet with a NotReady node) and
// the cases around them to I1–I3, decided from the revision journal. Each case's name
// starts with its scenario's number, as across the rollout tests.
func TestRevisionInvariants(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep, sts, ds := v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet
	done := workload.Rollout{}
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	all := v1alpha1.RolloutRules{
		Settle:       &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		MinInterval:  &metav1.Duration{Duration: 30 * time.Second},
		RevertWindow: &metav1.Duration{Duration: 10 * time.Minute},
	}
	settleOnly := v1alpha1.RolloutRules{Settle: all.Settle}
	// B rolls out since 20 s over A, which still serves 2 pods.
	bRolling := jr(7, jrev(A, time.Hour, 20*time.Second, 50*time.Minute), jrev(B, 20*time.Second, 0, -1))
	serving := history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 20*time.Second, 1)}, LastActivity: now}

	cases := map[string]struct {
		op         admissionv1.Operation
		rules      v1alpha1.RolloutRules
		old, obj   *workload.Workload
		journal    *journal.Journal
		history    history.History
		wantRules  []string
		wantPhrase string
	}{
		"1: pause, edit, resume while B rolls out: the edit is staged": {
			rules: all, journal: bRolling, history: serving,
			old: held(wl(dep, 3, B, rolling), 8), obj: held(wl(dep, 3, C, rolling), 9),
		},
		"1: pause, edit, resume while B rolls out: the resume starts C and is refused": {
			rules: all, journal: jr(9, bRolling.Revisions...), history: serving,
			old: held(wl(dep, 3, C, rolling), 9), obj: gen(wl(dep, 3, C, rolling), 10),
			wantRules: []string{RuleSettle, RuleMinInterval}, wantPhrase: "still rolling out",
		},
		"1: the resume, before the journal saw the paused edit, is refused": {
			rules: settleOnly, journal: jr(7, jrev(A, time.Hour, 0, 50*time.Minute)), history: serving,
			old: held(wl(dep, 3, C, rolling), 9), obj: gen(wl(dep, 3, C, rolling), 10),
			wantRules: []string{RuleSettle}, wantPhrase: "not yet recorded",
		},
		"1: resuming the template that rolls out is no new revision": {
			rules: all, journal: jr(8, bRolling.Revisions...), history: serving,
			old: held(wl(dep, 3, B, rolling), 8), obj: gen(wl(dep, 3, B, rolling), 9),
		},
		"1: a StatefulSet switched from OnDelete to RollingUpdate after an edit is refused": {
			rules: settleOnly, journal: jr(9, bRolling.Revisions...), history: serving,
			old: held(wl(sts, 3, C, rolling), 9), obj: gen(wl(sts, 3, C, rolling), 10),
			wantRules: []string{RuleSettle},
		},
		"1: a resume after B finished starts C": {
			rules: settleOnly, history: serving,
			journal: jr(9, jrev(A, time.Hour, 20*time.Minute, 50*time.Minute), jrev(B, 20*time.Minute, 0, 10*time.Minute)),
			old:     held(wl(dep, 3, C, done), 9), obj: gen(wl(dep, 3, C, done), 10),
		},
		"2: B's ReplicaSet not cached and the journal behind: B became current now": {
			rules:   all,
			journal: jr(6, jrev(A, 24*time.Hour, 0, 23*time.Hour)),
			history: history.History{Revisions: []history.Revision{rev(1, A, 24*time.Hour, 3)}, LastActivity: now.Add(-23 * time.Hour)},
			old:     gen(wl(dep, 3, B, rolling), 7), obj: gen(wl(dep, 3, C, rolling), 8),
			wantRules: []string{RuleSettle, RuleMinInterval}, wantPhrase: "moments ago",
		},
		"2: a cancel back to A passes while the journal is behind": {
			rules:   all,
			journal: jr(6, jrev(A, 24*time.Hour, 0, 23*time.Hour)),
			history: history.History{Revisions: []history.Revision{rev(1, A, 24*time.Hour, 3)}, LastActivity: now.Add(-23 * time.Hour)},
			old:     gen(wl(dep, 3, B, rolling), 7), obj: gen(wl(dep, 3, A, rolling), 8),
		},
		"3: A→B, cancelled back to A, then B again within the window is refused": {
			rules: all, history: serving,
			journal: jr(9, jrev(A, time.Hour, 2*time.Minute, 50*time.Minute), jrev(B, 2*time.Minute, time.Minute, -1), jrev(A, time.Minute, 0, -1)),
			old:     gen(wl(dep, 3, A, rolling), 9), obj: gen(wl(dep, 3, B, rolling), 10),
			wantRules: []string{RuleRevertWindow}, wantPhrase: "already went back once",
		},
		"3: the first cancel within the window passes": {
			rules: all, journal: bRolling, history: serving,
			old: gen(wl(dep, 3, B, rolling), 7), obj: gen(wl(dep, 3, A, rolling), 8),
		},
		"3: a return to A is no cancel once the status shows every pod on B, whatever the cache still shows": {
			rules: settleOnly, journal: bRolling, history: serving,
			old: gen(wl(dep, 3, B, workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 2, Want: 3, Total: 3}}), 7),
			obj: gen(wl(dep, 3, A, rolling), 8), wantRules: []string{RuleSettle},
		},
		"3: the second flip is refused even before the journal recorded the first": {
			rules: all, history: serving,
			journal: jr(8, jrev(A, time.Hour, 2*time.Minute, 50*time.Minute), jrev(B, 2*time.Minute, 0, -1)),
			old:     gen(wl(dep, 3, A, rolling), 9), obj: gen(wl(dep, 3, B, rolling), 10),
			wantRules: []string{RuleRevertWindow},
		},
		"4: B served a day, rolled back to A, A finished: B again a minute later is refused": {
			rules:   all,
			journal: jr(9, jrev(B, 24*time.Hour, 90*time.Second, 23*time.Hour), jrev(A, 90*time.Second, 0, time.Minute)),
			history: history.History{Revisions: []history.Revision{rev(2, B, 24*time.Hour, 0), rev(3, A, 30*24*time.Hour, 3)}},
			old:     gen(wl(dep, 3, A, done), 9), obj: gen(wl(dep, 3, B, done), 10),
			wantRules: []string{RuleRevertWindow}, wantPhrase: "go forward",
		},
		"4: going forward after minInterval passes": {
			rules:   all,
			journal: jr(9, jrev(B, 24*time.Hour, 90*time.Second, 23*time.Hour), jrev(A, 90*time.Second, 0, time.Minute)),
			history: history.History{Revisions: []history.Revision{rev(2, B, 24*time.Hour, 0), rev(3, A, 30*24*time.Hour, 3)}},
			old:     gen(wl(dep, 3, A, done), 9), obj: gen(wl(dep, 3, C, done), 10),
		},
		"9: re-created after an orphaning delete with a new template while B rolled out is refused": {
			op: admissionv1.Create, rules: settleOnly, journal: deleted(bRolling, 5*time.Second),
			obj: wl(dep, 3, C, done), wantRules: []string{RuleSettle}, wantPhrase: "create it with the pod template it had",
		},
		"9: re-created with the template it had passes": {
			op: admissionv1.Create, rules: all, journal: deleted(bRolling, 5*time.Second), obj: wl(dep, 3, B, done),
		},
		"9: re-created with a new template soon after the last revision is refused": {
			op: admissionv1.Create, rules: all,
			journal: deleted(jr(7, jrev(A, time.Hour, 10*time.Second, 50*time.Minute), jrev(B, 10*time.Second, 0, 0)), 5*time.Second),
			obj:     wl(dep, 3, C, done), wantRules: []string{RuleMinInterval},
		},
		"9: re-created before the leader saw the delete: what it last rolled out is unknown": {
			op: admissionv1.Create, rules: settleOnly, journal: jr(7, jrev(A, time.Hour, 0, 50*time.Minute)),
			obj: wl(dep, 3, C, done), wantRules: []string{RuleSettle}, wantPhrase: "not yet recorded the deletion",
		},
		"9: re-created with a template the journal never saw but orphaned pods run": {
			op: admissionv1.Create, rules: settleOnly, journal: deleted(jr(7, jrev(A, time.Hour, 0, 50*time.Minute)), 5*time.Second),
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), func() history.Revision { r := rev(2, B, 10*time.Second, 1); r.Pods = 1; return r }()}},
			obj:     wl(dep, 3, C, done), wantRules: []string{RuleSettle},
		},
		"9: a first CREATE has nothing to compare with": {
			op: admissionv1.Create, rules: all, obj: wl(dep, 3, C, done),
		},
		"10: a fully updated DaemonSet with one NotReady node takes a change": {
			rules:   settleOnly,
			journal: jr(7, jrev(A, time.Hour, 30*time.Minute, 50*time.Minute), jrev(B, 30*time.Minute, 0, 20*time.Minute)),
			old:     gen(wl(ds, 5, B, workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: ds, Updated: 5, Target: 5, Available: 4, Want: 5}}), 7),
			obj:     gen(wl(ds, 5, C, done), 8),
		},
		"10: without a journal, a stalled rollout takes its fix": {
			rules:   settleOnly,
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 30*time.Minute, 2)}, LastActivity: now.Add(-6 * time.Minute)},
			old: gen(wl(ds, 5, B, workload.Rollout{InProgress: true, Mixed: true,
				Progress: workload.Progress{Kind: ds, Updated: 3, Target: 5, Available: 4, Want: 5}}), 7),
			obj: gen(wl(ds, 5, C, done), 8),
		},
		"10: without a journal, a fully updated DaemonSet with a pod not Ready is no stall (it may have finished and lost it)": {
			rules:   settleOnly,
			history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 30*time.Minute, 4)}, LastActivity: now.Add(-6 * time.Minute)},
			old:     gen(wl(ds, 5, B, workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: ds, Updated: 5, Target: 5, Available: 4, Want: 5}}), 7),
			obj:     gen(wl(ds, 5, C, done), 8), wantRules: []string{RuleSettle},
		},
		"stall: progress the journal has not seen keeps a rollout from counting as stalled": {
			rules: settleOnly, history: history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 1), rev(2, B, time.Hour, 2)}},
			journal: jr(7, jrev(A, 2*time.Hour, time.Hour, 90*time.Minute), func() journal.Revision {
				r := jrev(B, time.Hour, 0, -1)
				r.Available = 1
				return r
			}()),
			old: gen(wl(dep, 3, B, rolling), 7), obj: gen(wl(dep, 3, C, rolling), 8),
			wantRules: []string{RuleSettle},
		},
		"stall: a paused rollout never stalls": {
			rules:   settleOnly,
			journal: jr(7, jrev(A, 2*time.Hour, time.Hour, 90*time.Minute), jrev(B, time.Hour, 0, -1)),
			history: history.History{Revisions: []history.Revision{rev(1, A, 2*time.Hour, 2), rev(2, B, time.Hour, 1)}},
			old:     held(wl(dep, 3, C, rolling), 7), obj: gen(wl(dep, 3, C, rolling), 8),
			wantRules: []string{RuleSettle},
		},
		"stall: a rollout without progress for stallAfter takes a fix": {
			rules:   settleOnly,
			journal: jr(7, jrev(A, 2*time.Hour, time.Hour, 90*time.Minute), jrev(B, time.Hour, 0, -1)),
			history: history.History{Revisions: []history.Revision{rev(1, A, 2*time.Hour, 2), rev(2, B, time.Hour, 0)}},
			old:     gen(wl(dep, 3, B, rolling), 7), obj: gen(wl(dep, 3, C, rolling), 8),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			op := tc.op
			if op == "" {
				op = admissionv1.Update
			}
			in := Input{Operation: op, Old: tc.old, New: tc.obj, Journal: tc.journal, History: tc.history, Now: now,
				TemplateChanged: tc.old != nil && !workload.SameTemplate(tc.old.Template, tc.obj.Template),
				User:            authenticationv1.UserInfo{Username: "operator"},
				Policies:        []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.RolloutPolicySpec{Rules: tc.rules}}}}
			d := decide(t, in)
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tc.wantRules, got); diff != "" {
				t.Errorf("violated rules (-want +got):\n%s\n%v", diff, d.Violations)
			}
			if tc.wantPhrase != "" && !containsPhrase(d.Messages(0), tc.wantPhrase) {
				t.Errorf("no message says %q: %v", tc.wantPhrase, d.Violations)
			}
		})
	}
}

func containsPhrase(msgs []string, phrase string) bool {
	for _, m := range msgs {
		if strings.Contains(m, phrase) {
			return true
		}
	}
	return false
}

// TestWindowsHoldNewRolloutsOnly: a Deny window refuses a new revision, and lets a cancel,
// the fix of a stalled rollout, a scale and the first CREATE through, since none of them
// rolls a new template over serving pods; a temporary exemption lets a refusal through on
// record, until it expires.
func TestWindowsHoldNewRolloutsOnly(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	spec := v1alpha1.RolloutPolicySpec{Windows: freeze, Rules: v1alpha1.RolloutRules{
		Settle:            &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}}
	finished := jr(7, jrev(A, 2*time.Hour, time.Hour, 90*time.Minute), jrev(B, time.Hour, 0, 50*time.Minute))
	bRolling := jr(7, jrev(A, time.Hour, 20*time.Second, 50*time.Minute), jrev(B, 20*time.Second, 0, -1))
	serving := history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 20*time.Second, 1)}, LastActivity: now}
	// bStuck is B rolling out with no progress on record for 11 minutes, past kube's
	// default progress deadline.
	bStuck := jr(7, jrev(A, time.Hour, 11*time.Minute, 50*time.Minute), jrev(B, 11*time.Minute, 0, -1))
	cases := map[string]struct {
		old, obj  *workload.Workload
		journal   *journal.Journal
		history   history.History
		user      string
		exemption *v1alpha1.TemporaryExemption
		windows   []v1alpha1.Window
		want      []string
	}{
		// A window stored while the policy webhook was down and that cannot be evaluated
		// (an interval never opens) is ignored: as an Allow window it would hold every
		// rollout of every selected workload for good.
		"a window that cannot be evaluated holds nothing": {old: gen(wl(dep, 3, B, workload.Rollout{}), 7), obj: gen(wl(dep, 3, C, workload.Rollout{}), 8),
			journal: finished, windows: []v1alpha1.Window{{Schedule: "@every 2h", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowAllow}}},
		"a valid window beside one that cannot be evaluated still holds": {old: gen(wl(dep, 3, B, workload.Rollout{}), 7), obj: gen(wl(dep, 3, C, workload.Rollout{}), 8),
			journal: finished, windows: append([]v1alpha1.Window{{Schedule: "0 0 31 4 *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}, freeze...),
			want: []string{RuleWindow}},
		"a new revision in the freeze is refused": {old: gen(wl(dep, 3, B, workload.Rollout{}), 7), obj: gen(wl(dep, 3, C, workload.Rollout{}), 8),
			journal: finished, want: []string{RuleWindow}},
		"a cancel passes": {old: gen(wl(dep, 3, B, rolling), 7), obj: gen(wl(dep, 3, A, rolling), 8), journal: bRolling, history: serving},
		"the fix of a stalled rollout passes": {old: gen(wl(dep, 3, B, workload.Rollout{InProgress: true, DeadlineExceeded: true, ProgressDeadline: 10 * time.Minute}), 7),
			obj: gen(wl(dep, 3, C, rolling), 8), journal: bStuck, history: serving},
		"a scale passes": {old: gen(wl(dep, 3, B, workload.Rollout{}), 7), obj: gen(wl(dep, 5, template("B", "5"), workload.Rollout{}), 8), journal: finished},
		"the on-call engineer's exemption lets it through, on record": {old: gen(wl(dep, 3, B, workload.Rollout{}), 7), obj: gen(wl(dep, 3, C, workload.Rollout{}), 8),
			journal: finished, user: "oncall", want: []string{RuleExemption},
			exemption: &v1alpha1.TemporaryExemption{Users: []string{"oncall"}, Expires: metav1.NewTime(now.Add(30 * time.Minute)), Reason: "INC-42"}},
		"an expired exemption does not": {old: gen(wl(dep, 3, B, workload.Rollout{}), 7), obj: gen(wl(dep, 3, C, workload.Rollout{}), 8),
			journal: finished, user: "oncall", want: []string{RuleWindow},
			exemption: &v1alpha1.TemporaryExemption{Users: []string{"oncall"}, Expires: metav1.NewTime(now.Add(-time.Minute)), Reason: "INC-42"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := spec
			if tc.windows != nil {
				s.Windows = tc.windows
			}
			if tc.exemption != nil {
				s.Exemptions.Temporary = []v1alpha1.TemporaryExemption{*tc.exemption}
			}
			d := decide(t, Input{Operation: admissionv1.Update, Old: tc.old, New: tc.obj, Journal: tc.journal, History: tc.history,
				Now: now, User: authenticationv1.UserInfo{Username: tc.user},
				Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: s}}})
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violated rules (-want +got):\n%s\n%v", diff, d.Violations)
			}
			if tc.exemption != nil && len(got) == 1 && got[0] == RuleExemption {
				if d.Action() != decision.Audit || !strings.Contains(d.Violations[0].Message, "INC-42") {
					t.Errorf("the exemption's admission must be audited with its reason: %v %v", d.Action(), d.Violations)
				}
			}
		})
	}
}
