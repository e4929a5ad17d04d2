package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// live is rev with live pods, as the cache counts them (terminating ones included).
func live(r history.Revision, pods int32) history.Revision {
	r.Live = pods
	return r
}

// running is r with pods live pods, none of them terminating.
func running(r history.Revision, pods int32) history.Revision {
	r.Live, r.Pods, r.Kept = pods, pods, pods
	return r
}

// TestCreateOverATerminatingPodStartsItsTemplate: a StatefulSet created OnDelete over the
// pods an orphaning delete left, as many as its replicas, one of them terminating (evicted
// a moment before): once that pod is gone kube creates its ordinal again from the
// created template (newVersionedStatefulSetPod), the template's first pod, so the CREATE
// is a start, judged as one; so with a failed pod, which kube deletes (processReplica).
// Counting either as one kube keeps read the CREATE as creating nothing.
func TestCreateOverATerminatingPodStartsItsTemplate(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	sts := v1alpha1.KindStatefulSet
	held := workload.Rollout{Held: true, OnDelete: true}
	adopted := running(rev(1, A, time.Hour, 2), 2)
	in := Input{Operation: admissionv1.Create, New: wl(sts, 2, B, held), Now: now,
		History: history.History{Revisions: []history.Revision{adopted}}}
	if startsStaged(in) {
		t.Fatalf("a CREATE adopting as many running pods as its replicas starts its template")
	}
	terminating := adopted
	terminating.Pods, terminating.Kept = 1, 1 // one of the two is terminating: still live, replaced once gone
	in.History.Revisions[0] = terminating
	if !startsStaged(in) {
		t.Errorf("a CREATE adopting a terminating pod, which kube replaces from its template, is no start")
	}
	failed := adopted
	failed.Live, failed.Kept = 1, 1 // one of the two has failed: not terminating, deleted and replaced
	in.History.Revisions[0] = failed
	if !startsStaged(in) {
		t.Errorf("a CREATE adopting a failed pod, which kube deletes and replaces from its template, is no start")
	}
}

// TestOnDeleteEditsAddNoThirdTemplate: an OnDelete DaemonSet or StatefulSet rolls out as
// its pods are replaced, each replacement (a node joining, a pod deleted or evicted) from
// the current template. An edit is judged by the templates with live pods: admitted while
// the replaced template was only staged, when it returns to a template with pods, or when
// it starts the rollout (one template has pods); refused when it would make a third.
func TestOnDeleteEditsAddNoThirdTemplate(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	settle := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}
	onDelete := workload.Rollout{OnDelete: true, Held: true}
	for _, kind := range []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet, v1alpha1.KindStatefulSet} {
		cases := map[string]struct {
			from, to *workloadTemplate
			revs     []history.Revision
			rules    v1alpha1.RolloutRules
			want     []string
		}{
			"the first edit starts an OnDelete rollout: two templates at most": {from: &workloadTemplate{A}, to: &workloadTemplate{B},
				revs: []history.Revision{live(rev(1, A, time.Hour, 4), 4)}, rules: settle},
			"an edit of a template only staged replaces it": {from: &workloadTemplate{B}, to: &workloadTemplate{C},
				revs: []history.Revision{live(rev(1, A, time.Hour, 4), 4), rev(2, B, time.Minute, 0)}, rules: settle},
			"an edit once the staged template has pods would make a third": {from: &workloadTemplate{B}, to: &workloadTemplate{C},
				revs: []history.Revision{live(rev(1, A, time.Hour, 3), 3), live(rev(2, B, time.Minute, 1), 1)}, rules: settle,
				want: []string{RuleSettle}},
			"terminating pods count: a template whose last pod terminates is live": {from: &workloadTemplate{B}, to: &workloadTemplate{C},
				revs: []history.Revision{live(rev(1, A, time.Hour, 0), 1), live(rev(2, B, time.Minute, 4), 4)}, rules: settle,
				want: []string{RuleSettle}},
			"a return to the template that still has pods": {from: &workloadTemplate{B}, to: &workloadTemplate{A},
				revs: []history.Revision{live(rev(1, A, time.Hour, 3), 3), live(rev(2, B, time.Minute, 1), 1)}, rules: settle},
			"once every pod runs the current template, the next edit starts again": {from: &workloadTemplate{B}, to: &workloadTemplate{C},
				revs: []history.Revision{rev(1, A, time.Hour, 0), live(rev(2, B, time.Minute, 4), 4)}, rules: settle},
			"without settle nothing counts templates": {from: &workloadTemplate{B}, to: &workloadTemplate{C},
				revs:  []history.Revision{live(rev(1, A, time.Hour, 3), 3), live(rev(2, B, time.Minute, 1), 1)},
				rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Minute}}},
		}
		for name, tc := range cases {
			t.Run(string(kind)+"/"+name, func(t *testing.T) {
				old, obj := wl(kind, 4, tc.from.t, onDelete), wl(kind, 4, tc.to.t, onDelete)
				in := Input{Operation: admissionv1.Update, Old: old, New: obj, TemplateChanged: true, Now: now,
					History:  history.History{Revisions: tc.revs, LastActivity: now},
					Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{Rules: tc.rules}}}}
				if !ReadsRevisions(in) {
					t.Fatal("the handler would not read the history this edit is judged by")
				}
				d := decide(t, in)
				var got []string
				for _, v := range d.Violations {
					got = append(got, v.Rule)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("violated rules (-want +got):\n%s\n%v", diff, d.Violations)
				}
				if len(got) > 0 {
					msg := d.Violations[0].Message
					for _, way := range []string{"return to the template of revision 1", "replace the pods of revision 1"} {
						if !strings.Contains(msg, way) {
							t.Errorf("the refusal does not name the way out %q: %s", way, msg)
						}
					}
				}
			})
		}
	}
}

type workloadTemplate struct{ t *corev1.PodTemplateSpec }

// TestScaleDuringRolloutAddsNoThirdTemplate: a scale whose --server-count follows
// spec.replicas starts no revision (I4) but changes the template; during an unfinished
// rollout kube would make one more ReplicaSet for it (A, B@3 and B@4 with pods at once).
// It is admitted after the rollout, as a scale back, or once the rollout has stalled.
func TestScaleDuringRolloutAddsNoThirdTemplate(t *testing.T) {
	A, B3, B4 := template("A", "3"), template("B", "3"), template("B", "4")
	dep := v1alpha1.KindDeployment
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	starting := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 0, Target: 3, Available: 3, Want: 3, Total: 3}}
	bRolling := jr(7, jrev(A, time.Hour, 20*time.Second, 50*time.Minute), jrev(B3, 20*time.Second, 0, -1))
	bStalled := jr(7, jrev(A, time.Hour, 20*time.Minute, 50*time.Minute), jrev(B3, 20*time.Minute, 0, -1))
	cases := map[string]struct {
		old, obj *workload.Workload
		journal  *journal.Journal
		revs     []history.Revision
		want     []string
	}{
		"during the rollout: a third template": {old: gen(wl(dep, 3, B3, rolling), 7), obj: gen(wl(dep, 4, B4, rolling), 8), journal: bRolling,
			revs: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B3, 20*time.Second, 1), 1)}, want: []string{RuleSettle}},
		"after the rollout: two templates at most": {old: gen(wl(dep, 3, B3, workload.Rollout{}), 7), obj: gen(wl(dep, 4, B4, workload.Rollout{}), 8),
			journal: jr(7, jrev(A, time.Hour, 30*time.Minute, 50*time.Minute), jrev(B3, 30*time.Minute, 0, 20*time.Minute)),
			revs:    []history.Revision{rev(1, A, time.Hour, 0), live(rev(2, B3, 30*time.Minute, 3), 3)}},
		"a scale back to a template that still has pods": {old: gen(wl(dep, 4, B4, rolling), 7), obj: gen(wl(dep, 3, B3, rolling), 8), journal: bRolling,
			revs: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B3, time.Minute, 1), 1), live(rev(3, B4, 20*time.Second, 1), 1)}},
		"a stalled rollout may be scaled": {old: gen(wl(dep, 3, B3, rolling), 7), obj: gen(wl(dep, 4, B4, rolling), 8), journal: bStalled,
			revs: []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B3, 20*time.Minute, 0), 1)}},
		// Rollout explorer, seed 16898 of 50,000: the controller has acted on B3 (0 of 3
		// updated) and is making its first pod, which the cache does not show: B3, then
		// B4 beside A.
		"during a rollout whose first pods the cache has not seen": {old: gen(wl(dep, 3, B3, starting), 7), obj: gen(wl(dep, 4, B4, starting), 8),
			journal: bRolling, revs: []history.Revision{live(rev(1, A, time.Hour, 3), 3)}, want: []string{RuleSettle}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := decide(t, Input{Operation: admissionv1.Update, Old: tc.old, New: tc.obj, TemplateChanged: true, Now: now, Journal: tc.journal,
				History:  history.History{Revisions: tc.revs, LastActivity: now.Add(-20 * time.Minute)},
				Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}})
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("violated rules (-want +got):\n%s\n%v", diff, d.Violations)
			}
			if d.Starts {
				t.Error("a scale is never a start")
			}
		})
	}
}

// TestScaleBelowThePartitionGivesTheCurrentRevisionPods: a StatefulSet created held
// (partition 3, 2 replicas) on B@2 over two pods of A it adopted takes B@2 as its current
// and update revision, with no pod. A scale to 4 with --server-count following (B@4) lifts
// the hold: kube creates ordinal 2, below the partition, from the current revision (B@2)
// and ordinal 3 from B@4: three templates with pods. Refused under settle as that; with
// the partition at 2 no new ordinal is below it, and only B@4 gets pods (the rollout
// explorer's seed 11674).
func TestScaleBelowThePartitionGivesTheCurrentRevisionPods(t *testing.T) {
	A, B2, B4 := template("A", "3"), template("B", "2"), template("B", "4")
	sts := v1alpha1.KindStatefulSet
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{},
		ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	// refusedAsThird is settle's finding that the new ordinals below the partition get the
	// current revision's template.
	refusedAsThird := func(found []finding) bool {
		return slices.ContainsFunc(found, func(f finding) bool {
			return f.rule == RuleSettle && strings.Contains(f.message, "below the partition get its current revision's template")
		})
	}
	old := wl(sts, 2, B2, workload.Rollout{Held: true, CurrentIsUpdate: true, CurrentRevision: rev(2, B2, time.Hour, 0).Name,
		Progress: workload.Progress{Kind: sts, Target: 0, Want: 2, Available: 2, Total: 2}})
	for partition, third := range map[int32]bool{3: true, 2: false, 4: false} {
		obj := wl(sts, 4, B4, workload.Rollout{Held: partition >= 4, InProgress: true, CurrentIsUpdate: true, Progress: workload.Progress{Kind: sts, Target: 4 - partition, Want: 4, Available: 2, Total: 2}})
		in := Input{Operation: admissionv1.Update, Old: old, New: obj, TemplateChanged: true, Now: now,
			History:  history.History{Revisions: []history.Revision{running(rev(1, A, 2*time.Hour, 2), 2), rev(2, B2, time.Hour, 0)}, LastActivity: now.Add(-time.Hour)},
			Policies: policies}
		// The start as the revision rules read it (the journal, in the explorer's sequence,
		// dates B@2 long ago; here no journal would say B@2 began moments ago, I1).
		found := checkThirdTemplate(in, &rules, &revisionState{start: true})
		if got := refusedAsThird(found); got != third {
			t.Errorf("scale to 4 under partition %d: refused as a third template %t, want %t: %v", partition, got, third, found)
		}
	}
	// Edited to C@2 while held (current B@2, update C@2), then scaled to 4 (C@4) under
	// partition 3: ordinal 2 gets B@2, found by the name the status gives it (the rollout
	// explorer's seed 27501).
	C2, C4 := template("C", "2"), template("C", "4")
	staged := wl(sts, 2, C2, workload.Rollout{Held: true, CurrentRevision: rev(2, B2, time.Hour, 0).Name,
		Progress: workload.Progress{Kind: sts, Target: 0, Want: 2, Available: 2, Total: 2}})
	for partition, third := range map[int32]bool{3: true, 2: false} {
		obj := wl(sts, 4, C4, workload.Rollout{InProgress: true, CurrentRevision: rev(2, B2, time.Hour, 0).Name,
			Progress: workload.Progress{Kind: sts, Target: 4 - partition, Want: 4, Available: 2, Total: 2}})
		in := Input{Operation: admissionv1.Update, Old: staged, New: obj, TemplateChanged: true, Now: now,
			History: history.History{Revisions: []history.Revision{running(rev(1, A, 2*time.Hour, 2), 2), rev(2, B2, time.Hour, 0),
				rev(3, C2, time.Minute, 0)}, LastActivity: now.Add(-time.Hour)},
			Policies: policies}
		found := checkThirdTemplate(in, &rules, &revisionState{resumes: true})
		if got := refusedAsThird(found); got != third {
			t.Errorf("staged C, scale to 4 under partition %d: refused as a third template %t, want %t: %v", partition, got, third, found)
		}
		if starts := currentStarts(in); (len(starts) == 1 && starts[0] == in.History.Revisions[1].Template) != third {
			t.Errorf("staged C, scale to 4 under partition %d: currentStarts %v, want B@2's template alone: %t", partition, starts, third)
		}
	}
}

// A held StatefulSet's scale that changes its template (--server-count follows the
// replicas) and keeps it held gives the new ordinals, below the partition, its current
// revision's template: created held on B@2 over pods of A it adopted, B@2 has no pod, so
// the scale to 3 is B@2's first pods, a start, and a Deny window refuses it as one. Once
// B@2 has pods, or when the scale adds no ordinal, it starts nothing.
func TestHeldScaleStartsTheCurrentRevision(t *testing.T) {
	A, B2, B3 := template("A", "2"), template("B", "2"), template("B", "3")
	sts := v1alpha1.KindStatefulSet
	spec := v1alpha1.RolloutPolicySpec{
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{},
			ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}},
		Windows: []v1alpha1.Window{{Name: "freeze", Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}},
	}
	held := func(replicas int32, t *corev1.PodTemplateSpec) *workload.Workload {
		return wl(sts, replicas, t, workload.Rollout{Held: true, CurrentIsUpdate: true, CurrentRevision: rev(2, B2, 0, 0).Name,
			Progress: workload.Progress{Kind: sts, Want: replicas, Available: 2, Total: 2}})
	}
	for _, c := range []struct {
		name     string
		replicas int32
		b2Pods   int32
		refused  bool
	}{
		{"scale up over a current revision with no pod", 3, 0, true},
		{"scale up once the current revision has pods", 3, 1, false},
		{"scale down", 1, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := B3
			if c.replicas == 1 {
				next = template("B", "1")
			}
			in := Input{Operation: admissionv1.Update, Old: held(2, B2), New: held(c.replicas, next), TemplateChanged: true, Now: now,
				History: history.History{Revisions: []history.Revision{running(rev(1, A, 2*time.Hour, 2), 2),
					running(rev(2, B2, time.Hour, 0), c.b2Pods)}, LastActivity: now.Add(-time.Hour)},
				Policies: []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: spec}}}
			d, err := Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.ContainsFunc(d.Violations, func(v decision.Violation) bool {
				return v.Rule == RuleWindow && strings.Contains(v.Message, "from its current revision")
			})
			if got != c.refused {
				t.Errorf("refused as a start of the current revision %t, want %t: %v", got, c.refused, d.Messages(decision.Audit))
			}
			if c.refused && d.Action() != decision.Deny {
				t.Errorf("action %v, want Deny", d.Action())
			}
			rules, err := StateRules(&in.Policies[0], in)
			if err != nil {
				t.Fatal(err)
			}
			if reads := slices.Contains(rules, RuleWindow); reads != (c.replicas > 2) {
				t.Errorf("StateRules %v: window read %t, want %t (check --cluster reads what the start needs)", rules, reads, c.replicas > 2)
			}
		})
	}
}

// A StatefulSet a partition holds makes its new ordinals and a deleted one from the revision
// its status names current, whatever its template: created held on B@2 over pods of A, then
// edited to C@2 (staged: current B@2, update C@2), a plain scale to 3 or the eviction of
// an A pod gives B@2 its first pod, a start a Deny window refuses. A status of an older
// generation names the current revision all the same (kube moves it only once every pod runs
// the update revision); one that names none (created a moment ago) leaves kube the update
// revision, C@2, which no pod runs either.
func TestHeldStatefulSetMakesPodsOfItsCurrentRevision(t *testing.T) {
	A, B2, C2 := template("A", "2"), template("B", "2"), template("C", "2")
	sts := v1alpha1.KindStatefulSet
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules:   v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}},
		Windows: []v1alpha1.Window{{Name: "freeze", Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}},
	}}}
	bRev := rev(2, B2, time.Hour, 0)
	held := func(replicas int32, unobserved int64, current string, statusPods int32) *workload.Workload {
		return wl(sts, replicas, C2, workload.Rollout{Held: true, CurrentRevision: current, CurrentPods: statusPods,
			Progress: workload.Progress{Kind: sts, Want: replicas, Available: 2, Total: 2, Unobserved: unobserved}})
	}
	for _, c := range []struct {
		name       string
		replicas   int32
		replaces   string
		bPods      int32
		unobserved int64
		current    string
		statusPods int32 // status.currentReplicas
		refused    bool
	}{
		{"a scale over a current revision with no pod", 3, "", 0, 0, bRev.Name, 0, true},
		{"the eviction of a pod over a current revision with no pod", 2, "kube-apiserver-0", 0, 0, bRev.Name, 0, true},
		{"a scale once the current revision has pods", 3, "", 1, 0, bRev.Name, 0, false},
		{"the eviction of a pod once the current revision has pods", 2, "kube-apiserver-0", 1, 0, bRev.Name, 0, false},
		{"a scale on a status of an older generation", 3, "", 1, 7, bRev.Name, 0, false},
		{"a scale on a status that names no current revision", 3, "", 1, 1, "", 0, true},
		{"a scale whose status counts pods of the current revision the cache does not show", 3, "", 0, 0, bRev.Name, 1, false},
		{"the same count on a status of an older generation", 3, "", 0, 7, bRev.Name, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := held(2, c.unobserved, c.current, c.statusPods)
			in := Input{Operation: admissionv1.Update, Old: old, New: held(c.replicas, c.unobserved, c.current, c.statusPods), Replaces: c.replaces, Now: now,
				History: history.History{Revisions: []history.Revision{running(rev(1, A, 2*time.Hour, 2), 2-c.bPods),
					running(bRev, c.bPods), running(rev(3, C2, time.Minute, 0), 0)}, LastActivity: now.Add(-time.Hour)},
				Policies: policies}
			if c.replaces != "" {
				in.New = old
			}
			d, err := Decide(in)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.ContainsFunc(d.Violations, func(v decision.Violation) bool { return v.Rule == RuleWindow })
			if got != c.refused || (c.refused && d.Action() != decision.Deny) {
				t.Errorf("refused as a start of the current revision %t (%v), want %t: %v", got, d.Action(), c.refused, d.Messages(decision.Audit))
			}
		})
	}
}

// Lifting a hold off a current revision that never made a pod gives it its first pods: a
// start, held to minInterval from when the revision it replaced became current, however
// long ago the journal dated the held one current. The sequence the explorer found: an
// exempt requester stages B over A's pods (a StatefulSet re-created held by its partition,
// or a paused Deployment), then an operator lifts the hold 30 s after A became current.
func TestLiftingAHoldOffANeverRolledRevisionIsAStart(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Minute}}}}}
	for _, c := range []struct {
		name    string
		kind    v1alpha1.WorkloadKind
		aSince  time.Duration // A became current this long ago
		bPods   int32
		fresh   bool // re-created a moment ago: its controller has not acted on it
		refused bool
	}{
		{"partition lowered 30 s after A", v1alpha1.KindStatefulSet, 30 * time.Second, 0, false, true},
		{"partition lowered 2 min after A", v1alpha1.KindStatefulSet, 2 * time.Minute, 0, false, false},
		{"partition lowered once B has a pod", v1alpha1.KindStatefulSet, 30 * time.Second, 1, false, false},
		{"partition lowered before the controller acted", v1alpha1.KindStatefulSet, 30 * time.Second, 0, true, true},
		{"resumed 30 s after A", v1alpha1.KindDeployment, 30 * time.Second, 0, false, true},
		{"resumed 2 min after A", v1alpha1.KindDeployment, 2 * time.Minute, 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ja := jrev(A, c.aSince, 10*time.Second, c.aSince-10*time.Second)
			j := jr(7, ja, jrev(B, 10*time.Second, 0, -1))
			j.Kind = c.kind
			held := workload.Rollout{Held: true, Progress: workload.Progress{Kind: c.kind, Want: 3, Available: 3, Total: 3, Updated: c.bPods}}
			lifted := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: c.kind, Want: 3, Target: 3, Available: 3, Total: 3, Updated: c.bPods}}
			if c.kind == v1alpha1.KindDeployment {
				held.Paused, held.Progress.Target = true, 3
			}
			if c.fresh {
				held.Fresh, held.Progress.Unobserved, held.Progress.Available, held.Progress.Total = true, 7, 0, 0
			}
			in := Input{Operation: admissionv1.Update, Old: gen(wl(c.kind, 3, B, held), 7), New: gen(wl(c.kind, 3, B, lifted), 8), Now: now,
				Journal: j, History: history.History{Revisions: []history.Revision{running(rev(1, A, time.Hour, 3-c.bPods), 3-c.bPods),
					running(rev(2, B, 10*time.Second, c.bPods), c.bPods)}, LastActivity: now.Add(-10 * time.Second)},
				Policies: policies}
			if !MayStart(in) {
				t.Fatalf("the lift is no MayStart: %+v", in.Old.Rollout)
			}
			d := decide(t, in)
			got := slices.ContainsFunc(d.Violations, func(v decision.Violation) bool {
				return v.Rule == RuleMinInterval && strings.Contains(v.Message, "its first pods")
			})
			if got != c.refused {
				t.Errorf("refused under minInterval %t, want %t: %v", got, c.refused, d.Messages(decision.Audit))
			}
			if !d.Starts {
				t.Error("the lift is no start to the fleet limit")
			}
		})
	}
}

// The first pods of a current revision come from requests other than a lift too: a held
// StatefulSet's evicted pod (kube re-creates it from the current revision, B, which the
// journal dates current since an exempt edit, with no pod), and a CREATE that does not hold
// what the deleted workload of its name held, over A's pods. Each is held to minInterval
// from A's start, and to a Deny window, as the lift is.
func TestFirstPodsOfTheCurrentRevisionAreAStart(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	sts := v1alpha1.KindStatefulSet
	spec := v1alpha1.RolloutPolicySpec{Rules: v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Minute}}}
	freeze := []v1alpha1.Window{{Name: "freeze", Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}
	h := history.History{Revisions: []history.Revision{running(rev(1, A, time.Hour, 3), 3), rev(2, B, 10*time.Second, 0)},
		LastActivity: now.Add(-10 * time.Second)}
	for _, c := range []struct {
		name    string
		aSince  time.Duration
		windows []v1alpha1.Window
		rule    string
	}{
		{"30 s after A", 30 * time.Second, nil, RuleMinInterval},
		{"2 min after A", 2 * time.Minute, nil, ""},
		{"2 min after A, in a Deny window", 2 * time.Minute, freeze, RuleWindow},
	} {
		j := jr(7, jrev(A, c.aSince, 10*time.Second, c.aSince-10*time.Second), jrev(B, 10*time.Second, 0, -1))
		j.Kind = sts
		s := spec
		s.Windows = c.windows
		policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: s}}
		heldOnB := gen(wl(sts, 3, B, workload.Rollout{Held: true, CurrentIsUpdate: true, CurrentRevision: "rev-B",
			Progress: workload.Progress{Kind: sts, Want: 3, Available: 3, Total: 3}}), 7)
		evicted := Input{Operation: admissionv1.Update, Old: heldOnB, New: heldOnB, Replaces: "kube-apiserver-0", Now: now,
			Journal: j, History: h, Policies: policies}
		created := Input{Operation: admissionv1.Create, New: wl(sts, 3, B, workload.Rollout{}), Now: now,
			Journal: func() *journal.Journal { d := deleted(j, 5*time.Second); d.Held = true; return d }(), History: h, Policies: policies}
		for name, in := range map[string]Input{"eviction": evicted, "create": created} {
			d := decide(t, in)
			got := slices.ContainsFunc(d.Violations, func(v decision.Violation) bool {
				return v.Rule == c.rule && (c.rule != RuleMinInterval || strings.Contains(v.Message, "its first pods"))
			})
			if got != (c.rule != "") || (c.rule == "" && len(d.Violations) > 0) {
				t.Errorf("%s, %s: %v, want a %q finding alone", c.name, name, d.Messages(decision.Audit), c.rule)
			}
		}
	}
}

// A workload whose pods are all gone, re-created with the revision it finished rolling
// out, restores a revision that ran: no first pods, so a Deny window does not hold it (the
// rollout explorer's seed 27609).
func TestRecreateOfAFinishedRevisionIsNoFirstPods(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	sts := v1alpha1.KindStatefulSet
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules:   v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Minute}},
		Windows: []v1alpha1.Window{{Name: "freeze", Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}}}}
	h := history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 0), rev(2, B, 10*time.Minute, 0)}, LastActivity: now.Add(-time.Minute)}
	for finished, refused := range map[bool]bool{true: false, false: true} {
		rb := jrev(B, 10*time.Minute, 0, -1)
		if finished {
			rb = jrev(B, 10*time.Minute, 0, 9*time.Minute)
		}
		j := jr(7, jrev(A, time.Hour, 10*time.Minute, 50*time.Minute), rb)
		j.Kind = sts
		j = deleted(j, 5*time.Second)
		in := Input{Operation: admissionv1.Create, New: wl(sts, 3, B, workload.Rollout{Held: true}), Now: now, Journal: j, History: h, Policies: policies}
		d := decide(t, in)
		if got := slices.ContainsFunc(d.Violations, func(v decision.Violation) bool { return v.Rule == RuleWindow }); got != refused {
			t.Errorf("B finished %t: refused by the window %t, want %t: %v", finished, got, refused, d.Messages(decision.Audit))
		}
	}
}

// growsBelowPartition counts the ordinals kube makes below the partition after an UPDATE:
// [start, start+min(replicas, partition)) less the old range.
func TestGrowsBelowPartition(t *testing.T) {
	B := template("B", "3")
	sts := v1alpha1.KindStatefulSet
	set := func(replicas, partition, start int32) *workload.Workload {
		w := wl(sts, replicas, B, workload.Rollout{Held: partition >= replicas,
			Progress: workload.Progress{Kind: sts, Want: replicas, Target: max(0, replicas-partition)}})
		w.OrdinalStart = start
		return w
	}
	for _, c := range []struct {
		name     string
		old, new *workload.Workload
		want     bool
	}{
		{"held, scaled up", set(2, 3, 0), set(3, 3, 0), true},
		{"held, scaled down", set(3, 3, 0), set(2, 3, 0), false},
		{"held, renumbered", set(3, 3, 0), set(3, 3, 1), true},
		{"lifted past an ordinal below the partition", set(2, 3, 0), set(4, 3, 0), true},
		{"lifted, no new ordinal below the partition", set(2, 2, 0), set(4, 2, 0), false},
		{"canary renumbered up: the new ordinals are above the partition", set(3, 1, 0), set(3, 1, 1), false},
		{"canary renumbered down", set(3, 1, 1), set(3, 1, 0), true},
		{"canary scaled up above the partition", set(3, 1, 0), set(4, 1, 0), false},
		{"canary scaled with the partition raised over the new ordinal", set(3, 1, 0), set(4, 4, 0), true},
	} {
		in := Input{Operation: admissionv1.Update, Old: c.old, New: c.new, Now: now}
		if got := growsBelowPartition(in) || growsHeld(in); got != c.want {
			t.Errorf("%s: grows below the partition %t, want %t", c.name, got, c.want)
		}
	}
}

// A canary (partition 1 of 3: ordinal 0 on v0, 1 and 2 on v2, its current revision v1 with
// no pod left) scaled to 4 with its partition raised to 4 in one request: kube makes
// ordinal 3, now below the partition, from v1, its first pods since, a start the Deny window
// refuses (judged as a held set's growth: held before and after, not a lift).
func TestCanaryScaledUnderARaisedPartitionStartsItsCurrentRevision(t *testing.T) {
	V0, V1, V2 := template("v0", "3"), template("v1", "3"), template("v2", "3")
	sts := v1alpha1.KindStatefulSet
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hcp"}, Spec: v1alpha1.RolloutPolicySpec{
		Windows: []v1alpha1.Window{{Name: "freeze", Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}}}}
	canary := gen(wl(sts, 3, V2, workload.Rollout{CurrentRevision: rev(2, V1, 0, 0).Name,
		Progress: workload.Progress{Kind: sts, Want: 3, Target: 2, Updated: 2, Available: 3, Total: 3}}), 5)
	raised := gen(wl(sts, 4, V2, workload.Rollout{Held: true, CurrentRevision: rev(2, V1, 0, 0).Name,
		Progress: workload.Progress{Kind: sts, Want: 4, Target: 0, Updated: 2, Available: 3, Total: 3}}), 6)
	j := jr(5, jrev(V0, 3*time.Hour, 2*time.Hour, 170*time.Minute), jrev(V1, 2*time.Hour, time.Hour, 110*time.Minute), jrev(V2, time.Hour, 0, -1))
	j.Kind = sts
	for v1Pods, refused := range map[int32]bool{0: true, 1: false} {
		in := Input{Operation: admissionv1.Update, Old: canary, New: raised, Now: now, Journal: j,
			History: history.History{Revisions: []history.Revision{running(rev(1, V0, 3*time.Hour, 1), 1), running(rev(2, V1, 2*time.Hour, v1Pods), v1Pods),
				running(rev(3, V2, time.Hour, 2), 2)}, LastActivity: now.Add(-time.Hour)},
			Policies: policies}
		d := decide(t, in)
		if got := slices.ContainsFunc(d.Violations, func(v decision.Violation) bool { return v.Rule == RuleWindow }); got != refused {
			t.Errorf("v1 with %d pods: refused by the window %t, want %t: %v", v1Pods, got, refused, d.Messages(decision.Audit))
		}
	}
}
