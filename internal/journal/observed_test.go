package journal

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

const agentUID = "5f6e7d8c-9b0a-4c1d-8e2f-3a4b5c6d7e8f"

func agentTemplate(tag string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "konnectivity-agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "konnectivity-agent", Image: "registry.k8s.io/kas-network-proxy/proxy-agent:" + tag}}}}
}

// agent is the DaemonSet kube-system/konnectivity-agent the journal in
// testdata/previous/daemonset-journal-configmap.json is of, on desired nodes, updated of
// them to v0.32.0, available of them Ready.
func agent(t *testing.T, desired, updated, available int32) *workload.Workload {
	t.Helper()
	labels := map[string]string{"app": "konnectivity-agent"}
	w, err := workload.From(&appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent", UID: agentUID, Generation: 4, Labels: labels},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: agentTemplate("v0.32.0")},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: desired, CurrentNumberScheduled: desired,
			UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// agentHistory is the DaemonSet's history with its pods (node: revision hash a or b, all
// Ready) on nodes that joined as joined says.
func agentHistory(t *testing.T, pods map[string]string, joined map[string]time.Time) history.History {
	t.Helper()
	cr := func(hash, tag string, n int64, created time.Time) appsv1.ControllerRevision {
		raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": agentTemplate(tag)}})
		if err != nil {
			t.Fatal(err)
		}
		return appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "konnectivity-agent-" + hash, CreationTimestamp: metav1.NewTime(created),
			OwnerReferences: []metav1.OwnerReference{{UID: agentUID, Controller: ptr.To(true)}}}, Revision: n, Data: runtime.RawExtension{Raw: raw}}
	}
	var list []corev1.Pod
	for node, hash := range pods {
		list = append(list, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "konnectivity-agent-" + node, Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: hash}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	revs, err := history.FromControllerRevisions(agentUID, "konnectivity-agent",
		[]appsv1.ControllerRevision{cr("a", "v0.31.0", 1, prevT0.Add(-3*time.Hour)), cr("b", "v0.32.0", 2, prevT0.Add(-10*time.Minute))}, list, joined)
	if err != nil {
		t.Fatal(err)
	}
	return history.History{Revisions: revs}
}

// TestReadsThePreviousReleasesDaemonSetJournal: a DaemonSet's journal release 5648181
// wrote, whose stall clock that release restarted when node-4 joined, reads with the
// meaning it was written with (no Observed: progress is all available pods, Available),
// and this release's recorder takes it over without a restart of the clock from node-4,
// and from then on restarts it only for progress on the nodes that needed the rollout
// (node-1 to node-3), not for node-5 joining. What it writes still reads to that release:
// the journal's own key carries no field that release does not know.
func TestReadsThePreviousReleasesDaemonSetJournal(t *testing.T) {
	cm := &corev1.ConfigMap{}
	golden.Load(t, "testdata/previous/daemonset-journal-configmap.json", cm)
	j, err := Decode(cm)
	if err != nil {
		t.Fatal(err)
	}
	cur := j.Current()
	if j.Observed != nil || cur.Available != 2 || !cur.Progressed.Equal(prevT0.Add(-2*time.Minute)) || !cur.Since.Equal(prevT0.Add(-10*time.Minute)) {
		t.Fatalf("read observed %+v, current %+v; want none, available 2 and progressed 11:58 since 11:50", j.Observed, cur)
	}

	before, after := prevT0.Add(-5*time.Hour), func(d time.Duration) time.Time { return prevT0.Add(d) }
	joined := map[string]time.Time{"node-1": before, "node-2": before, "node-3": before, "node-4": after(-3 * time.Minute)}
	pods := map[string]string{"node-1": "b", "node-2": "a", "node-3": "a", "node-4": "b"}
	h := agentHistory(t, pods, joined)
	r := h.Find(workload.FromSpec(ptr.To(agentTemplate("v0.32.0")), ""))
	if r == nil || r.Serving != 2 || r.ServingBefore(cur.Since) != 1 {
		t.Fatalf("v0.32.0 in the history: %+v; want 2 serving, 1 on the nodes it rolled out to", r)
	}
	old := agent(t, 4, 2, 4)
	if tl := View(j, v1alpha1.KindDaemonSet, old, h, nil, prevT0); tl.Progressed(r) {
		t.Error("a decision reads progress that the previous release's journal already counted")
	}

	// This release's leader observes the same state: no progress, and Observed from now on.
	next := Observe(j, old, h, nil, prevT0)
	if c := next.Current(); !c.Progressed.Equal(cur.Progressed) || next.Observed == nil || next.Observed.Updated != 1 || next.Observed.Revision != 2 {
		t.Fatalf("after this release's first look: progressed %v, observed %+v; want 11:58 kept, revision 2, 1 updated", c.Progressed, next.Observed)
	}
	// node-5 joins with a Ready v0.32.0 pod: not progress.
	joined["node-5"], pods["node-5"] = after(time.Minute), "b"
	h = agentHistory(t, pods, joined)
	next = Observe(next, agent(t, 5, 3, 5), h, nil, after(time.Minute))
	if c := next.Current(); !c.Progressed.Equal(cur.Progressed) || c.Available != 3 {
		t.Errorf("after node-5 joined: progressed %v, available %d; want 11:58 kept (the cluster grew), available 3", c.Progressed, c.Available)
	}
	// node-2 is replaced: progress.
	pods["node-2"] = "b"
	h = agentHistory(t, pods, joined)
	next = Observe(next, agent(t, 5, 4, 5), h, nil, after(2*time.Minute))
	if c := next.Current(); !c.Progressed.Equal(after(2*time.Minute)) || next.Observed.Updated != 2 {
		t.Errorf("after node-2 was replaced: progressed %v, observed %+v; want 12:02, 2 updated", c.Progressed, next.Observed)
	}

	// What this release writes, the previous one reads: its key has only the fields that
	// release knew (Decode refuses others), Observed is under a key of its own.
	out, err := Encode(next, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(out.Data[dataKey]), &fields); err != nil {
		t.Fatal(err)
	}
	var prev map[string]any
	if err := json.Unmarshal([]byte(cm.Data[dataKey]), &prev); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		if _, ok := prev[k]; !ok && k != "held" && k != "deleted" {
			t.Errorf("the journal's key has %q, which release 5648181 does not read", k)
		}
	}
	if strings.Contains(out.Data[dataKey], "updated") || out.Data[observedKey] == "" {
		t.Errorf("Observed is not kept apart: %v", out.Data)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if !back.ServedBefore {
		t.Error("a journal written with a finished revision does not record that the workload served")
	}
	if diff := cmp.Diff(next, back, cmpopts.IgnoreFields(Journal{}, "ServedBefore")); diff != "" {
		t.Errorf("the journal does not read back as written (-written +read):\n%s", diff)
	}
}

// TestObserveRecordsFlipsKubeNumbered: the leader looked last when B was current (revision
// 2); since, the Deployment went to A and back to B, which kube numbered 3 and 4. A
// leader that finds B current again records both flips (the return to B is one within any
// window), which the ReplicaSets' creation times alone cannot show: both are hours old.
// Had it recorded A as current before kube numbered it, A is not counted twice.
func TestObserveRecordsFlipsKubeNumbered(t *testing.T) {
	A, B := workload.FromSpec(ptr.To(agentTemplate("A")), ""), workload.FromSpec(ptr.To(agentTemplate("B")), "")
	sumA, _ := A.Sum()
	sumB, _ := B.Sum()
	w := &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web"}, Template: B}
	j := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web", Generation: 2,
		Revisions: []Revision{
			{Template: sumA, Since: t0.Add(-3 * time.Hour), Until: at(t0.Add(-2 * time.Hour)), Progressed: t0.Add(-3 * time.Hour)},
			{Template: sumB, Since: t0.Add(-2 * time.Hour), Finished: at(t0.Add(-2 * time.Hour)), Progressed: t0.Add(-2 * time.Hour)},
		},
		Observed: &Observed{Revision: 2, Template: sumB}}

	h := history.History{Revisions: []history.Revision{numbered(A, 3, 1), numbered(B, 4, 2)}}
	next := Observe(j, w, h, nil, t0)
	var got []string
	for _, r := range next.Revisions {
		got = append(got, map[string]string{sumA: "A", sumB: "B"}[r.Template]+"@"+r.Since.Sub(t0).String())
	}
	if want := []string{"A@-3h0m0s", "B@-2h0m0s", "A@0s", "B@0s"}; !cmp.Equal(got, want) {
		t.Errorf("revisions %v, want %v", got, want)
	}
	tl := Timeline{Revisions: next.Revisions}
	if n := tl.ReturnsSince(t0.Add(-10*time.Minute), 10*time.Minute); n != 1 {
		t.Errorf("returns within 10m = %d, want 1 (to B; A had left 2 hours before)", n)
	}
	if next.Observed == nil || next.Observed.Revision != 4 || next.Observed.Template != sumB {
		t.Errorf("observed %+v, want revision 4 of B", next.Observed)
	}

	// The leader recorded A as current before kube numbered it (revision 2 was the newest
	// it saw); A's number 3 is that change, not another.
	wa := *w
	wa.Template = A
	j2 := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web", Generation: 3,
		Revisions: []Revision{
			{Template: sumB, Since: t0.Add(-2 * time.Hour), Until: at(t0.Add(-time.Minute)), Progressed: t0.Add(-2 * time.Hour)},
			{Template: sumA, Since: t0.Add(-time.Minute), Progressed: t0.Add(-time.Minute)},
		},
		Observed: &Observed{Revision: 2, Template: sumB}}
	next = Observe(j2, &wa, history.History{Revisions: []history.Revision{numbered(B, 2), numbered(A, 3, 1)}}, nil, t0)
	if len(next.Revisions) != 2 || !next.Current().Since.Equal(t0.Add(-time.Minute)) {
		t.Errorf("A, recorded before kube numbered it, recorded again: %+v", next.Revisions)
	}
}

// TestRecreatedOverAnUnbegunRollout: a workload deleted (orphaning) right after its
// template changed, before its controller made one pod of it available, and re-created
// with that template: the rollout begins when the new workload's controller acts, so the
// revision counts as current from the leader's first look at it (seed 49943 of the
// rollout model's 50,000-sequence run: minInterval had been measured from the deleted
// workload's edit, 6 s before any pod of it existed).
func TestRecreatedOverAnUnbegunRollout(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	w := agent(t, 3, 0, 3)
	sum, _ := w.Template.Sum()
	for _, available := range []int32{0, 1} {
		j := &Journal{Kind: v1alpha1.KindDaemonSet, Namespace: "kube-system", Name: "konnectivity-agent", UID: "deleted-one", Deleted: ptr.To(t0.Add(time.Second)),
			Revisions: []Revision{{Template: "older", Since: t0.Add(-time.Hour), Until: ptr.To(t0), Finished: ptr.To(t0.Add(-50 * time.Minute)), Progressed: t0.Add(-time.Hour)},
				{Template: sum, Since: t0, Progressed: t0, Available: available}}}
		next := Observe(j, w, history.History{}, nil, t0.Add(8*time.Second))
		cur := next.Current()
		want := t0.Add(8 * time.Second)
		if available > 0 {
			want = t0 // its rollout had begun: it keeps its times
		}
		if !cur.Since.Equal(want) || !cur.Progressed.Equal(want) || !next.Revisions[0].Until.Equal(want) {
			t.Errorf("available %d: current since %s, progressed %s, the one before until %s; want all %s",
				available, cur.Since, cur.Progressed, next.Revisions[0].Until, want)
		}
	}
}

// TestRevivedJournalStartsTheStallClock: a journal retired while its workload was not
// guarded (the same UID) keeps its times when the workload is guarded again, but not the
// last progress of a rollout it had not seen finish: nothing kept it up to date, and the
// rollout may have finished and lost a pod since, which would read as a stall since then.
func TestRevivedJournalStartsTheStallClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	w := agent(t, 3, 0, 3)
	sum, _ := w.Template.Sum()
	j := &Journal{Kind: v1alpha1.KindDaemonSet, Namespace: "kube-system", Name: "konnectivity-agent", UID: w.UID, Deleted: ptr.To(t0.Add(2 * time.Minute)),
		Revisions: []Revision{{Template: "older", Since: t0.Add(-time.Hour), Until: ptr.To(t0), Finished: ptr.To(t0.Add(-50 * time.Minute)), Progressed: t0.Add(-time.Hour)},
			{Template: sum, Since: t0, Progressed: t0.Add(time.Minute), Available: 2}}}
	revived := t0.Add(30 * time.Minute)
	next := Observe(j, w, history.History{}, nil, revived)
	if cur := next.Current(); !cur.Since.Equal(t0) || !cur.Progressed.Equal(revived) {
		t.Errorf("revived: current since %s, progressed %s; want since %s, progressed %s", cur.Since, cur.Progressed, t0, revived)
	}
}

// TestRetiredJournalRecordsFlipsKubeNumbered: a journal retired while its workload was
// outside every policy's selection is of the same workload (its UID), and kube numbered
// every change made outside after the revision it observed: the leader that finds the
// workload guarded again records those flips, as a journal that only lagged does, so that
// a return made outside reads as one (dated when the leader saw it, as the entry that
// brought it in counted it made then).
func TestRetiredJournalRecordsFlipsKubeNumbered(t *testing.T) {
	A, B := workload.FromSpec(ptr.To(agentTemplate("A")), ""), workload.FromSpec(ptr.To(agentTemplate("B")), "")
	sumA, _ := A.Sum()
	sumB, _ := B.Sum()
	w := &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web"}, Template: A}
	j := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web", Generation: 2, Deleted: at(t0.Add(-time.Hour)),
		Revisions: []Revision{{Template: sumA, Since: t0.Add(-3 * time.Hour), Finished: at(t0.Add(-3 * time.Hour)), Progressed: t0.Add(-3 * time.Hour)}},
		Observed:  &Observed{Revision: 1, Template: sumA}}
	next := Observe(j, w, history.History{Revisions: []history.Revision{numbered(B, 2), numbered(A, 3, 1)}}, nil, t0)
	var got []string
	for _, r := range next.Revisions {
		got = append(got, map[string]string{sumA: "A", sumB: "B"}[r.Template]+"@"+r.Since.Sub(t0).String())
	}
	if want := []string{"A@-3h0m0s", "B@0s", "A@0s"}; !cmp.Equal(got, want) {
		t.Errorf("revisions %v, want %v", got, want)
	}
	if next.Deleted != nil {
		t.Errorf("observed guarded again, the journal is still retired (%v)", next.Deleted)
	}
}

// TestRetiredJournalOfAnotherUIDRecordsAReturnKubeNumbered: the workload of the name was
// deleted with --cascade=orphan and re-created outside every selection (another UID, its
// journal retired with A current), then went A → B → A there over the ReplicaSets it
// adopted, which keep kube's numbers. Relabelled back in with A, the journal's current
// template, it has left A and come back: the leader records the detour (from the
// retirement, when it last looked) and the return as becoming current now, as the entry
// was judged (checkEnteredChange). Kept as it was, A would date from before the walk and
// an edit right after the entry would pass minInterval.
func TestRetiredJournalOfAnotherUIDRecordsAReturnKubeNumbered(t *testing.T) {
	A, B := workload.FromSpec(ptr.To(agentTemplate("A")), ""), workload.FromSpec(ptr.To(agentTemplate("B")), "")
	sumA, _ := A.Sum()
	sumB, _ := B.Sum()
	w := &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web-2"}, Template: A}
	j := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web-1", Generation: 2, Deleted: at(t0.Add(-time.Hour)),
		Revisions: []Revision{{Template: sumB, Since: t0.Add(-3 * time.Hour), Until: at(t0.Add(-2 * time.Hour)), Finished: at(t0.Add(-3 * time.Hour)), Progressed: t0.Add(-3 * time.Hour)},
			{Template: sumA, Since: t0.Add(-2 * time.Hour), Finished: at(t0.Add(-2 * time.Hour)), Progressed: t0.Add(-2 * time.Hour)}},
		Observed: &Observed{Revision: 2, Template: sumA}}
	name := map[string]string{sumA: "A", sumB: "B"}
	revisions := func(next *Journal) (got []string) {
		for _, r := range next.Revisions {
			got = append(got, name[r.Template]+"@"+r.Since.Sub(t0).String())
		}
		return got
	}
	next := Observe(j, w, history.History{Revisions: []history.Revision{numbered(B, 3, 1), numbered(A, 4, 2)}}, nil, t0)
	if got, want := revisions(next), []string{"B@-3h0m0s", "A@-2h0m0s", "B@-1h0m0s", "A@0s"}; !cmp.Equal(got, want) {
		t.Errorf("revisions %v, want %v", got, want)
	}
	if _, err := Encode(next, "holdfast-system"); err != nil {
		t.Errorf("the journal recorded does not read back: %v", err)
	}
	// Numbers that only the journal's own revision accounts for are no return.
	next = Observe(j, w, history.History{Revisions: []history.Revision{numbered(B, 1), numbered(A, 2)}}, nil, t0)
	if got, want := revisions(next), []string{"B@-3h0m0s", "A@-2h0m0s"}; !cmp.Equal(got, want) {
		t.Errorf("no return: revisions %v, want %v", got, want)
	}
}

// TestPausedRollbackIsNoRolloutOfIt: a Deployment rolling A → B is paused and its template
// set back to A; kube's Deployment controller renumbers A's ReplicaSet above B's while
// paused. A journal that kept looking does not read that number as A rolled out: B stays
// current while the workload is held, so that the resume is judged as the cancel it is.
// (A retired journal, which did not look, does: TestRetiredJournal*.)
func TestPausedRollbackIsNoRolloutOfIt(t *testing.T) {
	A, B := workload.FromSpec(ptr.To(agentTemplate("A")), ""), workload.FromSpec(ptr.To(agentTemplate("B")), "")
	sumA, _ := A.Sum()
	sumB, _ := B.Sum()
	w := &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web"}, Template: A}
	w.Rollout.Held, w.Rollout.Paused, w.Rollout.InProgress = true, true, true
	j := &Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web", Generation: 3,
		Revisions: []Revision{{Template: sumA, Since: t0.Add(-3 * time.Hour), Until: at(t0.Add(-time.Minute)), Finished: at(t0.Add(-3 * time.Hour)), Progressed: t0.Add(-3 * time.Hour)},
			{Template: sumB, Since: t0.Add(-time.Minute), Progressed: t0.Add(-time.Minute)}},
		Observed: &Observed{Revision: 2, Template: sumB}}
	ra, rb := numbered(A, 3, 1), numbered(B, 2)
	ra.Pods, ra.Serving, ra.Live, rb.Pods, rb.Serving, rb.Live = 2, 2, 2, 1, 1, 1
	next := Observe(j, w, history.History{Revisions: []history.Revision{rb, ra}}, nil, t0)
	if cur := next.Current(); cur.Template != sumB {
		t.Errorf("paused and set back to A: current %v, want B still (the resume is a cancel)", map[string]string{sumA: "A", sumB: "B"}[cur.Template])
	}
}

// TestDaemonSetNodesLeavingMidRolloutIsNoStall: a DaemonSet's rollout over 8 nodes has
// updated 5 when 3 of those 5 nodes leave (a scale-down of the node pool). Its progress is
// the most pods of the new revision seen serving on the nodes that needed the rollout;
// waited for as it was (5), the 3 nodes left could not reach it again before the rollout
// finished, and a healthy rollout would read as stalled after stallAfter (its next edit
// then passing as the fix). The mark is lowered to what the others serve, the leaving is
// no progress, and the next pod updated is.
func TestDaemonSetNodesLeavingMidRolloutIsNoStall(t *testing.T) {
	b, a := "konnectivity-agent-b", "konnectivity-agent-a"
	all := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	j := observeOnNodes(t, nil, prevT0, map[string]string{"n1": b, "n2": b, "n3": b, "n4": b, "n5": a, "n6": a, "n7": a, "n8": a}, all...)
	first := prevT0.Add(time.Minute)
	j = observeOnNodes(t, j, first, map[string]string{"n1": b, "n2": b, "n3": b, "n4": b, "n5": b, "n6": a, "n7": a, "n8": a}, all...)
	if got := j.Current().Progressed; !got.Equal(first) || j.Observed.Updated != 5 || j.Observed.Nodes != 8 {
		t.Fatalf("5 of 8 updated: progressed %s, observed %+v; want progress at %s, 5 updated of 8 nodes", got, j.Observed, first)
	}
	// n1 to n3 leave; n6 is updated meanwhile.
	rest := all[3:]
	j = observeOnNodes(t, j, prevT0.Add(2*time.Minute), map[string]string{"n4": b, "n5": b, "n6": b, "n7": a, "n8": a}, rest...)
	if got := j.Current().Progressed; !got.Equal(first) || j.Observed.Updated != 3 || j.Observed.Nodes != 5 {
		t.Errorf("3 nodes left: progressed %s, observed %+v; want no progress (still %s), the mark lowered to 3 of 5 nodes", got, j.Observed, first)
	}
	next := prevT0.Add(3 * time.Minute)
	j = observeOnNodes(t, j, next, map[string]string{"n4": b, "n5": b, "n6": b, "n7": b, "n8": a}, rest...)
	if got := j.Current().Progressed; !got.Equal(next) || j.Observed.Updated != 4 {
		t.Errorf("n7 updated after the nodes left: progressed %s, observed %+v; want progress at %s", got, j.Observed, next)
	}
	// What the recorder writes reads back with the nodes it measured.
	cm, err := Encode(j, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(cm)
	if err != nil || back.Observed.Nodes != 5 {
		t.Errorf("read back: %+v, %v; want 5 nodes", back.Observed, err)
	}
}

// numbered is a ReplicaSet of template t, 3 h old, numbered n by kube after renumbered.
func numbered(t *workload.Template, n int64, renumbered ...int64) history.Revision {
	sum, _ := t.Sum()
	return history.Revision{Name: "rs-" + sum[:8], Number: n, Renumbered: renumbered, Template: t, Created: t0.Add(-3 * time.Hour)}
}

// TestLineageOfAWorkloadCreatedAgain (fleet explorer, seed 6279): the journal of a
// workload the leader saw deleted, then created again under its name, records the object
// it replaced (Previous), and once that the new one settled on one template (Settled):
// its controller acted on its spec, every pod it wants runs its template, and no other
// pod its selector matches is live (an orphan it may still adopt, a pod of the deleted
// one still terminating). A start recorded for the deleted object then holds nothing
// (Observed.Replaced). Both travel under their own key, so that the observed key still
// reads to the release before it.
func TestLineageOfAWorkloadCreatedAgain(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	sum, _ := agent(t, 3, 3, 3).Template.Sum()
	deleted := &Journal{Kind: v1alpha1.KindDaemonSet, Namespace: "kube-system", Name: "konnectivity-agent", UID: "deleted-one", Generation: 2, Deleted: ptr.To(t0),
		Revisions: []Revision{{Template: sum, Since: t0.Add(-time.Hour), Finished: ptr.To(t0.Add(-50 * time.Minute)), Progressed: t0.Add(-50 * time.Minute), Available: 3}},
		Observed:  &Observed{Revision: 2, Template: sum}}
	selected := func(h history.History, n int32) history.History {
		h.Selected, h.SelectedRead = n, true
		return h
	}
	settled := agentHistory(t, map[string]string{"node-1": "b", "node-2": "b", "node-3": "b"}, nil)
	adopted := agentHistory(t, map[string]string{"node-1": "b", "node-2": "b", "node-3": "a"}, nil)

	if !Settling(deleted, agent(t, 3, 0, 0), t0.Add(time.Second)) {
		t.Errorf("a workload created in place of one the leader saw gone: its pods are not read")
	}
	created := Observe(deleted, agent(t, 3, 0, 0), history.History{}, nil, t0.Add(time.Second))
	if o := created.Observed; o.Previous != "deleted-one" || o.Settled || o.Replaced("deleted-one") {
		t.Fatalf("first observed, its controller not done: previous %q, settled %v; want deleted-one, false", o.Previous, o.Settled)
	}
	if !Settling(created, agent(t, 3, 3, 3), t0.Add(2*time.Second)) {
		t.Errorf("not settled yet: its pods are not read")
	}
	for name, h := range map[string]history.History{
		"an adopted pod of another template still live": selected(adopted, 3),
		"an orphan its controller has not adopted yet":  selected(settled, 4),
		"its selected pods not read":                    settled,
	} {
		if o := Observe(created, agent(t, 3, 3, 3), h, nil, t0.Add(2*time.Second)).Observed; o.Previous != "deleted-one" || o.Settled {
			t.Errorf("%s: previous %q, settled %v; want deleted-one, false", name, o.Previous, o.Settled)
		}
	}
	done := Observe(created, agent(t, 3, 3, 3), selected(settled, 3), nil, t0.Add(3*time.Second))
	if o := done.Observed; !o.Replaced("deleted-one") || o.Replaced("another") || o.Replaced("") {
		t.Fatalf("settled: previous %q, settled %v; want it to have replaced deleted-one and nothing else", o.Previous, o.Settled)
	}
	if Settling(done, agent(t, 3, 3, 3), t0.Add(4*time.Second)) {
		t.Errorf("settled: its pods are still read")
	}
	// Never settled: once every start of the replaced object has lapsed, the lineage is
	// dropped, and its pods no longer read.
	lapsed := t0.Add(time.Second + budget.StartLapse + budget.MaxClockSkew)
	if Settling(created, agent(t, 3, 3, 3), lapsed) {
		t.Errorf("lapsed: its pods are still read")
	}
	if o := Observe(created, agent(t, 3, 3, 3), selected(adopted, 3), nil, lapsed).Observed; o.Previous != "" || o.Settled {
		t.Errorf("lapsed: previous %q, settled %v; want the lineage dropped", o.Previous, o.Settled)
	}
	// Settled is for good: a later rollout of the new object is its own journal's to count.
	if o := Observe(done, agent(t, 3, 1, 3), adopted, nil, t0.Add(4*time.Second)).Observed; !o.Replaced("deleted-one") {
		t.Errorf("rolling again: previous %q, settled %v; want it kept", o.Previous, o.Settled)
	}
	// A leader whose workload cache lags the journals (a failover) observes the object the
	// journal's replaced: that journal was not seen gone, and the newer object is no
	// previous one of the older.
	newer := *done
	newer.UID, newer.Deleted = "newer-one", nil
	if Settling(&newer, agent(t, 3, 3, 3), t0.Add(5*time.Second)) {
		t.Errorf("a journal of another object not seen gone: pods read")
	}
	if o := Observe(&newer, agent(t, 3, 3, 3), selected(settled, 3), nil, t0.Add(5*time.Second)).Observed; o.Previous != "" || o.Replaced("newer-one") {
		t.Errorf("the older object observed over the newer one's journal: previous %q, settled %v; want none", o.Previous, o.Settled)
	}
	cm, err := Encode(done, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data[observedKey], "deleted-one") || cm.Data[lineageKey] != `{"previous":"deleted-one","since":"2026-12-01T08:00:01Z","settled":true}` {
		t.Errorf("keys: observed %s, lineage %s; want the lineage under its own key only", cm.Data[observedKey], cm.Data[lineageKey])
	}
	back, err := Decode(cm)
	if err != nil || !back.Observed.Replaced("deleted-one") {
		t.Fatalf("read back: %v, %+v", err, back)
	}
	var previous Observed // the release before it reads the observed key strictly
	dec := json.NewDecoder(strings.NewReader(cm.Data[observedKey]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&previous); err != nil {
		t.Errorf("observed key no longer reads strictly: %v", err)
	}
	// A lineage this release cannot read (a later release's) is none; the journal stays valid.
	for _, other := range []string{`{"previous":""}`, `[]`, `{`} {
		cm.Data[lineageKey] = other
		if back, err := Decode(cm); err != nil || back.Observed.Replaced("deleted-one") {
			t.Errorf("lineage %s: %v, %+v; want a valid journal without lineage", other, err, back)
		}
	}
	cm.Data[lineageKey] = `{"previous":"deleted-one","since":"2026-12-01T08:00:01Z","settled":true,"later":1}`
	if back, err := Decode(cm); err != nil || !back.Observed.Replaced("deleted-one") {
		t.Errorf("a later release's field: %v; want the lineage read", err)
	}
	delete(cm.Data, lineageKey) // written by a release before it
	if back, err := Decode(cm); err != nil || back.Observed.Replaced("deleted-one") {
		t.Errorf("without the key: %v, %+v; want no lineage", err, back.Observed)
	}
	// The same object observed again records no lineage.
	if o := Observe(&Journal{Kind: deleted.Kind, Namespace: deleted.Namespace, Name: deleted.Name, UID: agentUID, Revisions: deleted.Revisions,
		Observed: &Observed{Revision: 2, Template: sum}}, agent(t, 3, 3, 3), settled, nil, t0).Observed; o.Previous != "" || o.Settled {
		t.Errorf("the same object: previous %q, settled %v; want none", o.Previous, o.Settled)
	}
}
