package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestEnteringTheSelectionBringsItsState: a workload whose labels bring it into a policy's
// selection is judged on what it brings. The tenant's walk (orphan the guarded workload,
// re-create it outside the selection with a new template, relabel it back in while both
// templates run) is refused at the relabel, and so is a rollout its controller has not
// finished; a workload with one template and a finished rollout enters, a relabel that
// keeps it selected or unselected is not judged, and an exempt requester may relabel.
func TestEnteringTheSelectionBringsItsState(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets:    v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}},
		Rules:      v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}},
		Exemptions: v1alpha1.Exemptions{ServiceAccounts: []string{"platform/onboarding"}}}}
	finished := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 3, Want: 3, Total: 4}}
	unobserved := workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3, Unobserved: 4}}
	notReady := workload.Rollout{InProgress: true, Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 1, Want: 3, Total: 3}}
	one := history.History{Revisions: []history.Revision{live(rev(1, B, time.Minute, 3), 3)}}
	two := history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B, time.Minute, 2), 2)}}
	labelled := func(r workload.Rollout, labels map[string]string) *workload.Workload {
		w := wl(dep, 3, B, r)
		w.Labels = labels
		return w
	}
	onboarding := authenticationv1.UserInfo{Username: "system:serviceaccount:platform:onboarding"}
	for name, c := range map[string]struct {
		old, new map[string]string
		r        workload.Rollout
		h        history.History
		exempt   bool
		refused  string
	}{
		"relabelled in while two templates run (the re-create walk)": {old: nil, new: guarded, r: rolling, h: two, refused: "2 pod templates have live pods"},
		"relabelled in before its controller acted":                  {old: nil, new: guarded, r: unobserved, h: one, refused: "its rollout is not finished"},
		"relabelled in with one template, rolled out":                {old: nil, new: guarded, r: finished, h: one},
		"relabelled in with pods not yet Ready on its one template":  {old: nil, new: guarded, r: notReady, h: one},
		"relabelled in by the exempt onboarding identity":            {old: nil, new: guarded, r: rolling, h: two, exempt: true},
		"a relabel that keeps it selected":                           {old: guarded, new: map[string]string{"tier": "control-plane", "team": "a"}, r: rolling, h: two},
		"a relabel that keeps it out":                                {old: nil, new: map[string]string{"team": "a"}, r: rolling, h: two},
	} {
		t.Run(name, func(t *testing.T) {
			in := Input{Operation: admissionv1.Update, Old: labelled(c.r, c.old), New: labelled(c.r, c.new), Now: now,
				Policies: []v1alpha1.RolloutPolicy{p}}
			if c.exempt {
				in.User = onboarding
			}
			entering := c.old == nil && c.new["tier"] == "control-plane"
			if got := ReadsRevisions(in); got != entering {
				t.Errorf("ReadsRevisions = %t, want %t (the history is read exactly for a workload entering)", got, entering)
			}
			in.History = c.h
			d := decide(t, in)
			if c.refused == "" {
				if len(d.Violations) > 0 {
					t.Fatalf("refused: %v", d.Violations)
				}
				return
			}
			if len(d.Violations) != 1 || d.Violations[0].Rule != RuleSelection || !strings.Contains(d.Violations[0].Message, c.refused) ||
				!strings.Contains(d.Violations[0].Message, "roll it back") {
				t.Fatalf("got %v, want one selection violation naming %q and the way out", d.Violations, c.refused)
			}
		})
	}
}

// TestEnteringWithAChangeMadeOutsideCountsAsTheChange: the tenant's walk with a finished
// rollout (orphan the guarded workload, re-create it unselected with a new template, let
// it roll out, relabel it back in) is judged against the journal of its name, which the
// delete retired but kept: the entry counts as the change from the revision the policy
// last saw, so minInterval, revertWindow and the windows hold across it. The template the
// journal recorded enters freely, and so does a change older than every rule.
func TestEnteringWithAChangeMadeOutsideCountsAsTheChange(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	finished := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	one := history.History{Revisions: []history.Revision{live(rev(1, B, time.Minute, 3), 3)}}
	sumOf := func(tpl *corev1.PodTemplateSpec) string {
		s, ok := wl(dep, 3, tpl, finished).Template.Sum()
		if !ok {
			t.Fatal("template does not decode")
		}
		return s
	}
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	deleted := now.Add(-2 * time.Minute)
	// journalOf is the retired journal: first was current until replaced, the last current since.
	journalOf := func(revs ...journal.Revision) *journal.Journal {
		return &journal.Journal{Kind: dep, Namespace: "ns", Name: "web", UID: "deleted-uid", Deleted: &deleted, Revisions: revs}
	}
	recent := journalOf(journal.Revision{Template: sumOf(A), Since: now.Add(-10 * time.Minute), Finished: at(8 * time.Minute)})
	old := journalOf(journal.Revision{Template: sumOf(A), Since: now.Add(-3 * time.Hour), Finished: at(3 * time.Hour)})
	flapped := journalOf(
		journal.Revision{Template: sumOf(B), Since: now.Add(-5 * time.Hour), Until: at(3 * time.Hour), Finished: at(5 * time.Hour)},
		journal.Revision{Template: sumOf(A), Since: now.Add(-3 * time.Hour), Finished: at(3 * time.Hour)})
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	for name, c := range map[string]struct {
		rules   v1alpha1.RolloutRules
		windows []v1alpha1.Window
		j       *journal.Journal
		refused string // the rule, "" when admitted
	}{
		"within minInterval of the recorded revision": {rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}, j: recent, refused: RuleMinInterval},
		"after minInterval":                           {rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}, j: old},
		"back to the template it replaced (flapping)": {rules: v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: 6 * time.Hour}}, j: flapped, refused: RuleRevertWindow},
		"back after the revert window":                {rules: v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: 2 * time.Hour}}, j: flapped},
		"inside a Deny window":                        {rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Minute}}, windows: freeze, j: old, refused: RuleWindow},
		"with the template the journal recorded":      {rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}, windows: freeze, j: journalOf(journal.Revision{Template: sumOf(B), Since: now.Add(-time.Minute), Finished: at(0)})},
		"with no journal of its name":                 {rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}, windows: freeze},
	} {
		t.Run(name, func(t *testing.T) {
			p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
				Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}}, Rules: c.rules, Windows: c.windows}}
			oldW, newW := wl(dep, 3, B, finished), wl(dep, 3, B, finished)
			newW.Labels = guarded
			in := Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: now, Policies: []v1alpha1.RolloutPolicy{p},
				Journal: c.j, History: one}
			d := decide(t, in)
			if c.refused == "" {
				if len(d.Violations) > 0 {
					t.Fatalf("refused: %v", d.Violations)
				}
				return
			}
			if len(d.Violations) != 1 || d.Violations[0].Rule != c.refused || !strings.Contains(d.Violations[0].Message, "outside the selection") ||
				!strings.Contains(d.Violations[0].Message, "relabel it after") {
				t.Fatalf("got %v, want one %s violation saying the change was made outside and when to relabel", d.Violations, c.refused)
			}
		})
	}
}

// A workload that left the selection, went back to the template it replaced with another
// --server-count (a scale while outside), and relabels in within revertWindow flaps as
// surely as one that returns with the count it had: under argsMatchReplicas the entry's
// revert check compares the templates' shapes, as checkRevision does for an edit.
func TestEnteringWithAReturnAtAnotherCountIsAFlap(t *testing.T) {
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	B3, A3, B4 := template("B", "3"), template("A", "3"), template("B", "4")
	finished := func(replicas int32) workload.Rollout {
		return workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: replicas, Target: replicas, Available: replicas, Want: replicas, Total: replicas}}
	}
	record := func(tpl *corev1.PodTemplateSpec, since time.Duration, until *time.Time) journal.Revision {
		w := wl(dep, 3, tpl, finished(3))
		sum, _ := w.Template.Sum()
		shape, err := w.Template.Shape(flags)
		if err != nil {
			t.Fatal(err)
		}
		fin := now.Add(-since)
		return journal.Revision{Template: sum, Shape: shape, Since: now.Add(-since), Until: until, Finished: &fin}
	}
	left := now.Add(-10 * time.Minute)
	j := &journal.Journal{Kind: dep, Namespace: "tenant-a", Name: "kube-apiserver", Revisions: []journal.Revision{
		record(B3, time.Hour, &left), record(A3, 10*time.Minute, nil)}}
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}},
		Rules:   v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: time.Hour}, ArgsMatchReplicas: flags}}}
	oldW, newW := wl(dep, 4, B4, finished(4)), wl(dep, 4, B4, finished(4))
	newW.Labels = guarded
	h := history.History{Revisions: []history.Revision{live(rev(3, B4, time.Minute, 4), 4)}}
	d := decide(t, Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: now, Policies: []v1alpha1.RolloutPolicy{p}, Journal: j, History: h})
	if len(d.Violations) != 1 || d.Violations[0].Rule != RuleRevertWindow {
		t.Fatalf("got %v, want the revert window's refusal of a return at another --server-count", d.Violations)
	}
}

// TestEnteringAfterADetourOutsideIsAReturn: the journal records only while the workload is
// selected, so a walk in and out at once leaves it the template it last recorded. The
// cluster's revisions show what happened outside since: a workload that went A → B → A
// outside enters with A, the journal's current template, and a workload that went A → B →
// C → B enters with B, which the journal never saw. Each entry is a return, to a template
// left when the next one started (its revision's creation: fixed, so the wait ends), and
// revertWindow holds it; once the window has passed, the relabel enters.
func TestEnteringAfterADetourOutsideIsAReturn(t *testing.T) {
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	finished := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	sumA, _ := workload.Fingerprint(A)
	j := &journal.Journal{Kind: dep, Namespace: "tenant-a", Name: "kube-apiserver", Revisions: []journal.Revision{
		{Template: sumA, Since: now.Add(-time.Hour), Progressed: now.Add(-time.Hour), Finished: ptr.To(now.Add(-50 * time.Minute))}}}
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}},
		Rules: v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: 90 * time.Second},
			MinInterval: &metav1.Duration{Duration: 20 * time.Second}}}}
	enter := func(tpl *corev1.PodTemplateSpec, h history.History, at time.Time) Decision {
		oldW, newW := wl(dep, 3, tpl, finished), wl(dep, 3, tpl, finished)
		newW.Labels = guarded
		return decide(t, Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: at, Policies: []v1alpha1.RolloutPolicy{p}, Journal: j, History: h})
	}
	for name, tc := range map[string]struct {
		tpl *corev1.PodTemplateSpec
		h   history.History
	}{
		// B created 40 s ago; A, renumbered above it, came back since.
		"A, B, back to A": {A, history.History{Revisions: []history.Revision{rev(2, B, 40*time.Second, 0), rev(3, A, time.Hour, 3)}}},
		// B created 60 s ago, C 40 s ago, B renumbered above C.
		"A, B, C, back to B": {B, history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(3, C, 40*time.Second, 0), rev(4, B, time.Minute, 3)}}},
	} {
		d := enter(tc.tpl, tc.h, now)
		if len(d.Violations) != 1 || d.Violations[0].Rule != RuleRevertWindow || !strings.Contains(d.Violations[0].Message, "relabel it after 50s") {
			t.Errorf("%s: entered 40s after leaving the template: %v, want the revert window's refusal for 50s more", name, d.Violations)
		}
		if d := enter(tc.tpl, tc.h, now.Add(51*time.Second)); len(d.Violations) != 0 {
			t.Errorf("%s: entered once the revert window passed: %v, want admitted", name, d.Violations)
		}
	}
	// No revision started after the journal's current one: nothing happened outside.
	if d := enter(A, history.History{Revisions: []history.Revision{rev(1, B, 2*time.Hour, 0), rev(2, A, time.Hour, 3)}}, now); len(d.Violations) != 0 {
		t.Errorf("entered with the template the journal records, nothing changed outside: %v", d.Violations)
	}
}

// TestEditRightAfterEnteringReadsTheRetiredJournal: the journal of a workload that left
// the selection is retired, and the leader records again only a moment after the workload
// enters. Outside, it went A → B → A; it entered with A (the entry judged the return), and
// an edit back to B follows at once. Read from the cluster's history alone, B was left when
// A's renumbered revision can first have become current (B's creation, 100 s ago, outside
// a 90 s revertWindow); read as the leader will record it (journal.Observe), the return to
// A is made now, and going back to B is flapping.
func TestEditRightAfterEnteringReadsTheRetiredJournal(t *testing.T) {
	dep := v1alpha1.KindDeployment
	A, B := template("A", "3"), template("B", "3")
	finished := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	sumA, _ := workload.Fingerprint(A)
	j := &journal.Journal{Kind: dep, Namespace: "tenant-a", Name: "kube-apiserver", UID: "uid", Generation: 1,
		Deleted:   ptr.To(now.Add(-2 * time.Minute)),
		Observed:  &journal.Observed{Revision: 1, Template: sumA},
		Revisions: []journal.Revision{{Template: sumA, Since: now.Add(-time.Hour), Progressed: now.Add(-time.Hour), Finished: ptr.To(now.Add(-50 * time.Minute))}}}
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules: v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: 90 * time.Second}}}}
	oldW, newW := gen(wl(dep, 3, A, finished), 3), gen(wl(dep, 3, B, finished), 4)
	oldW.UID, newW.UID = "uid", "uid"
	h := history.History{Revisions: []history.Revision{rev(2, B, 100*time.Second, 0), live(rev(3, A, time.Hour, 3), 3)}}
	d := decide(t, Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: now, Policies: []v1alpha1.RolloutPolicy{p}, Journal: j, History: h})
	if len(d.Violations) != 1 || d.Violations[0].Rule != RuleRevertWindow {
		t.Errorf("the edit back to B right after the workload entered with its return to A: %v, want the revert window's refusal", d.Violations)
	}
}

// TestEnteringAfterADetourWhoseRevisionsAreGone: the journal records A current and, in
// Observed, kube's number 1 for it. Outside the selection the workload went A → B → A,
// and kube's revisions no longer show the order: A's revision made anew after B's (a
// Deployment with revisionHistoryLimit: 0 deleted it once B finished; or the workload was
// deleted and created again outside), or B's pruned. A's number, 3, above the journal's 1,
// says it became current again since: the entry is a return, dated no earlier than A's
// revision's start, the journal's retirement (the leader saw it leave before anything
// changed) or its pods' activity, whichever is latest; revertWindow holds it from there.
func TestEnteringAfterADetourWhoseRevisionsAreGone(t *testing.T) {
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	A, B := template("A", "3"), template("B", "3")
	finished := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	sumA, _ := workload.Fingerprint(A)
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}},
		Rules:   v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: 90 * time.Second}}}}
	for name, tc := range map[string]struct {
		h       history.History
		retired time.Duration
		wait    time.Duration
	}{
		"A's revision made anew after B's":    {history.History{Revisions: []history.Revision{rev(2, B, 60*time.Second, 0), rev(3, A, 30*time.Second, 3)}}, 2 * time.Minute, time.Minute},
		"B's revision pruned, A's renumbered": {history.History{Revisions: []history.Revision{rev(3, A, time.Hour, 3)}}, time.Minute, 30 * time.Second},
	} {
		j := &journal.Journal{Kind: dep, Namespace: "tenant-a", Name: "kube-apiserver", UID: "uid", Generation: 1,
			Deleted:   ptr.To(now.Add(-tc.retired)),
			Observed:  &journal.Observed{Revision: 1, Template: sumA},
			Revisions: []journal.Revision{{Template: sumA, Since: now.Add(-time.Hour), Progressed: now.Add(-time.Hour), Finished: ptr.To(now.Add(-50 * time.Minute))}}}
		enter := func(at time.Time) Decision {
			oldW, newW := gen(wl(dep, 3, A, finished), 5), gen(wl(dep, 3, A, finished), 5)
			oldW.UID, newW.UID = "uid", "uid"
			newW.Labels = guarded
			return decide(t, Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: at, Policies: []v1alpha1.RolloutPolicy{p}, Journal: j, History: tc.h})
		}
		if d := enter(now); len(d.Violations) != 1 || d.Violations[0].Rule != RuleRevertWindow ||
			!strings.Contains(d.Violations[0].Message, "relabel it after "+tc.wait.String()) {
			t.Errorf("%s: entered with A: %v, want the revert window's refusal for %s more", name, d.Violations, tc.wait)
		}
		if d := enter(now.Add(tc.wait + time.Second)); len(d.Violations) != 0 {
			t.Errorf("%s: entered once the revert window passed: %v", name, d.Violations)
		}
	}
}

// TestEnteringAfterScalesOutsideIsNoReturn: the journal saw A at --server-count=3 current,
// numbered 1. Outside the selection the workload was scaled under argsMatchReplicas (kube
// made a ReplicaSet per template: A4 numbered 2, then A5 numbered 3), or its current
// ReplicaSet was deleted and kube made it anew (numbered 2). Its own number is above the
// journal's, yet only scales, or nothing, account for the numbers in between: no other
// template became current, and the entry is no return (a scale is no start, I4). A number
// in between that no revision has any more may have been another template's: a return.
func TestEnteringAfterScalesOutsideIsNoReturn(t *testing.T) {
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	A3, A4, A5 := template("A", "3"), template("A", "4"), template("A", "5")
	fin := func(n int32) workload.Rollout {
		return workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: n, Target: n, Available: n, Want: n, Total: n}}
	}
	sum3, _ := wl(dep, 3, A3, fin(3)).Template.Sum()
	shape3, _ := wl(dep, 3, A3, fin(3)).Template.Shape(flags)
	j := &journal.Journal{Kind: dep, Namespace: "tenant-a", Name: "kube-apiserver", UID: "uid", Generation: 1,
		Observed: &journal.Observed{Revision: 1, Template: sum3},
		Revisions: []journal.Revision{{Template: sum3, Shape: shape3, Since: now.Add(-time.Hour), Progressed: now.Add(-time.Hour),
			Finished: ptr.To(now.Add(-50 * time.Minute))}}}
	policy := func(flags []v1alpha1.ArgMatchesReplicas) []v1alpha1.RolloutPolicy {
		return []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
			Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}},
			Rules:   v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: time.Hour}, ArgsMatchReplicas: flags}}}}
	}
	named := func(r history.Revision, name string) history.Revision { r.Name = name; return r }
	enter := func(replicas int32, tpl *corev1.PodTemplateSpec, flags []v1alpha1.ArgMatchesReplicas, revs ...history.Revision) Decision {
		oldW, newW := wl(dep, replicas, tpl, fin(replicas)), wl(dep, replicas, tpl, fin(replicas))
		oldW.UID, newW.UID = "uid", "uid"
		newW.Labels = guarded
		return decide(t, Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: now, Policies: policy(flags), Journal: j,
			History: history.History{Revisions: revs}})
	}
	if d := enter(4, A4, flags, rev(1, A3, time.Hour, 0), named(rev(2, A4, time.Minute, 4), "rev-a4")); len(d.Violations) != 0 {
		t.Errorf("entering after a scale made outside: %v, want admitted", d.Violations)
	}
	if d := enter(5, A5, flags, rev(1, A3, time.Hour, 0), named(rev(2, A4, 2*time.Minute, 0), "rev-a4"), named(rev(3, A5, time.Minute, 5), "rev-a5")); len(d.Violations) != 0 {
		t.Errorf("entering after two scales made outside: %v, want admitted", d.Violations)
	}
	if d := enter(3, A3, nil, rev(2, A3, time.Minute, 3)); len(d.Violations) != 0 {
		t.Errorf("entering after the current ReplicaSet was made anew (numbered 2): %v, want admitted", d.Violations)
	}
	if d := enter(5, A5, flags, rev(1, A3, time.Hour, 0), named(rev(3, A5, time.Minute, 5), "rev-a5")); !slices.Contains(rulesOf(d), RuleRevertWindow) {
		t.Errorf("entering with number 2 gone (another template's, as far as the cluster tells): %v, want revertWindow's refusal", d.Violations)
	}
}

// TestEnteringWithoutAJournal: the workload left the selection more than an hour ago, and
// the leader dropped its retired journal after journal.Retention (the policy's 1 h
// revertWindow). Outside, it went A -> B 10 min ago and back to A: kube's ReplicaSets
// still show it, and the entry is a return within revertWindow, as it was while the
// journal was kept. A workload whose templates all became current before the policy's
// lookback (onboarded, or back after a long time) enters as ever, in a Deny window too;
// one whose template became current within minInterval of the one before it waits.
func TestEnteringWithoutAJournal(t *testing.T) {
	dep := v1alpha1.KindDeployment
	guarded := map[string]string{"tier": "control-plane"}
	A, B := template("A", "3"), template("B", "3")
	finished := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	enter := func(rules v1alpha1.RolloutRules, windows []v1alpha1.Window, tpl *corev1.PodTemplateSpec, revs ...history.Revision) Decision {
		p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
			Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: guarded}}, Rules: rules, Windows: windows}}
		oldW, newW := wl(dep, 3, tpl, finished), wl(dep, 3, tpl, finished)
		newW.Labels = guarded
		return decide(t, Input{Operation: admissionv1.Update, Old: oldW, New: newW, Now: now, Policies: []v1alpha1.RolloutPolicy{p},
			History: history.History{Revisions: revs, LastActivity: now.Add(-5 * time.Minute)}})
	}
	revert := v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: time.Hour}}
	if d := enter(revert, nil, A, rev(2, B, 10*time.Minute, 0), rev(3, A, 3*time.Hour, 3)); !slices.Contains(rulesOf(d), RuleRevertWindow) {
		t.Errorf("A -> B -> A outside within the last 10 min, no journal: %v, want revertWindow's refusal", d.Violations)
	}
	freeze := []v1alpha1.Window{{Name: "freeze", Schedule: "55 11 * * *", Duration: metav1.Duration{Duration: 59 * time.Minute}, Action: v1alpha1.WindowDeny}}
	if d := enter(revert, freeze, B, rev(1, A, 30*time.Hour, 0), rev(2, B, 3*time.Hour, 3)); len(d.Violations) != 0 {
		t.Errorf("onboarding a workload whose last change was 3 h ago, in a Deny window: %v, want admitted", d.Violations)
	}
	if d := enter(revert, freeze, B, rev(1, A, 30*time.Hour, 0), rev(2, B, 10*time.Minute, 3)); !slices.Contains(rulesOf(d), RuleWindow) {
		t.Errorf("entering in a Deny window with a template that became current 10 min ago: %v, want the window's hold", d.Violations)
	}
	minInterval := v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}
	if d := enter(minInterval, nil, B, rev(1, A, 20*time.Minute, 0), rev(2, B, 5*time.Minute, 3)); !slices.Contains(rulesOf(d), RuleMinInterval) {
		t.Errorf("entering with B, current 5 min after A became current 20 min ago, no journal: %v, want minInterval's refusal", d.Violations)
	}
	// A (30 days old) -> B (made 5 h ago) -> A -> B: kube renumbered A 3 and B 4, and the
	// earlier numbers tell that A's return came after B was made, so B was left within the
	// last 5 h (History.Current reads a ReplicaSet's earlier numbers too).
	a, b := rev(3, A, 30*24*time.Hour, 0), rev(4, B, 5*time.Hour, 3)
	a.Renumbered, b.Renumbered = []int64{1}, []int64{2}
	if d := enter(v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: 24 * time.Hour}}, nil, B, a, b); !slices.Contains(rulesOf(d), RuleRevertWindow) {
		t.Errorf("A -> B -> A -> B outside, no journal: %v, want revertWindow's refusal", d.Violations)
	}
	// Only B's ReplicaSet is left (revisionHistoryLimit: 0), numbered 5 and made 10 min ago:
	// it followed another template, which a Deny window holds.
	if d := enter(v1alpha1.RolloutRules{}, freeze, B, rev(5, B, 10*time.Minute, 3)); !slices.Contains(rulesOf(d), RuleWindow) {
		t.Errorf("B made 10 min ago, numbered 5, the revisions before it gone, in a Deny window: %v, want the window's hold", d.Violations)
	}
	// A flag-following scale made outside (A at --server-count=2, then 3) is no change (I4).
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	A2 := template("A", "2")
	r2 := rev(1, A2, 30*time.Hour, 0)
	r2.Name = "rev-a2"
	if d := enter(v1alpha1.RolloutRules{ArgsMatchReplicas: flags}, freeze, A, r2, rev(2, A, 10*time.Minute, 3)); len(d.Violations) != 0 {
		t.Errorf("entering after a scale made outside 10 min ago, in a Deny window: %v, want admitted", d.Violations)
	}
}
