package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestPausedScaleAddsNoThirdTemplate: checkScaleDuringRollout runs only when
// the request MayStart, so a paused Deployment is scaled (flag following replicas, a new
// template B@4) unjudged; the resume that follows is not a start (B@4 has B's shape, I4)
// and is not a scale (its template does not change), so nothing counts the templates with
// live pods either. The Deployment controller then creates a ReplicaSet for B@4 while A
// and B still have pods: three templates with live pods, what I7 promises never happens.
// The direct scale (no pause) is refused (TestScaleDuringRolloutAddsNoThirdTemplate).
func TestPausedScaleAddsNoThirdTemplate(t *testing.T) {
	A, B3, B4 := template("A", "3"), template("B", "3"), template("B", "4")
	dep := v1alpha1.KindDeployment
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		ArgsMatchReplicas: flags}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	shape := func(t *testing.T, w *workload.Workload) string {
		s, err := w.Template.Shape(flags)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rolling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
	paused := rolling
	paused.Paused, paused.Held = true, true
	revs := []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B3, 20*time.Second, 1), 1)}

	// A rolling to B: the journal recorded B as current 20 s ago, unfinished.
	ja, jb := jrev(A, time.Hour, 20*time.Second, 50*time.Minute), jrev(B3, 20*time.Second, 0, -1)
	ja.Shape, jb.Shape = shape(t, wl(dep, 3, A, rolling)), shape(t, wl(dep, 3, B3, rolling))

	steps := []struct {
		name     string
		old, obj *workload.Workload
		j        *journal.Journal
	}{
		{"pause", gen(wl(dep, 3, B3, rolling), 7), gen(wl(dep, 3, B3, paused), 8), jr(7, ja, jb)},
		{"scale while paused (B@3 -> B@4)", gen(wl(dep, 3, B3, paused), 8), gen(wl(dep, 4, B4, paused), 9), jr(8, ja, jb)},
		{"resume", gen(wl(dep, 4, B4, paused), 9), gen(wl(dep, 4, B4, rolling), 10), jr(9, ja, jb)},
	}
	refused := false
	for _, s := range steps {
		in := Input{Operation: admissionv1.Update, Old: s.old, New: s.obj, Now: now, Journal: s.j,
			History: history.History{Revisions: revs, LastActivity: now.Add(-10 * time.Second)}, Policies: policies}
		in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
		if !ReadsRevisions(in) && in.TemplateChanged {
			t.Logf("%s: the handler does not even read the history", s.name)
		}
		d := decide(t, in)
		t.Logf("%s: action %v, violations %v", s.name, d.Action(), d.Violations)
		if d.Action() == decision.Deny {
			refused = true
		}
	}
	if !refused {
		t.Errorf("pause -> flag-following scale -> resume was admitted at every step while A and B have live pods: " +
			"the resumed Deployment creates a ReplicaSet for B@4, a third template with live pods (I7)")
	}
}

// TestPartitionHeldScaleAddsNoThirdTemplate: a StatefulSet held by a
// partition at its replicas (Held, not OnDelete) mid-rollout (A and B have pods) is scaled
// with its flag: MayStart is false (held) so checkScaleDuringRollout is skipped, and
// stagesEdit is false (not OnDelete) so checkStagedEdit is skipped too. kube creates the
// new ordinal (3 >= partition 3) on the update revision B@4 at once: A, B and B@4 have
// live pods. The same scale under OnDelete is refused (checkStagedEdit).
func TestPartitionHeldScaleAddsNoThirdTemplate(t *testing.T) {
	A, B3, B4 := template("A", "3"), template("B", "3"), template("B", "4")
	sts := v1alpha1.KindStatefulSet
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}, ArgsMatchReplicas: flags}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	revs := []history.Revision{live(rev(1, A, time.Hour, 2), 2), live(rev(2, B3, time.Minute, 1), 1)}
	for name, held := range map[string]workload.Rollout{
		"partition at the replicas": {Held: true, InProgress: true, Mixed: true},
		"OnDelete (control)":        {Held: true, OnDelete: true, InProgress: true, Mixed: true},
	} {
		t.Run(name, func(t *testing.T) {
			in := Input{Operation: admissionv1.Update, Old: wl(sts, 3, B3, held), New: wl(sts, 4, B4, held), Now: now,
				History: history.History{Revisions: revs, LastActivity: now}, Policies: policies, TemplateChanged: true}
			d := decide(t, in)
			if d.Action() != decision.Deny {
				t.Errorf("a flag-following scale of a held StatefulSet whose pods run A and B is admitted (ReadsRevisions=%v); "+
					"kube creates ordinal 3 on B@4: a third template with live pods", ReadsRevisions(in))
			}
		})
	}
}

// TestOnDeleteEditReadsTheStatusOverALaggingCache: an OnDelete DaemonSet (or StatefulSet) had B
// staged over A; the operator deleted one pod and kube re-created it from B. The old
// object (read by the API server from etcd) already says so: 1 of 4 pods updated. The
// cache has not yet seen the new pod (holdfast's replicas lag; the model allows 3 s), so B
// has no live pods there and checkStagedEdit reads B as "only staged": the edit to C is
// admitted, and the next replaced pod makes A, B and C live at once. The decision
// ignores the request's own evidence that the replaced template has pods.
func TestOnDeleteEditReadsTheStatusOverALaggingCache(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	settle := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{Rules: settle}}}
	for _, kind := range []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet, v1alpha1.KindStatefulSet} {
		t.Run(string(kind), func(t *testing.T) {
			// Status (from etcd): 1 of 4 pods runs the current template B.
			status := workload.Rollout{OnDelete: true, Held: true, InProgress: true, Mixed: true,
				Progress: workload.Progress{Kind: kind, Updated: 1, Target: 4, Available: 4, Want: 4}}
			// Cache: the deleted A pod still terminating (live), B's new pod not yet seen.
			revs := []history.Revision{live(rev(1, A, time.Hour, 3), 4), rev(2, B, time.Minute, 0)}
			in := Input{Operation: admissionv1.Update, Old: wl(kind, 4, B, status), New: wl(kind, 4, C, status), Now: now,
				History: history.History{Revisions: revs, LastActivity: now}, Policies: policies, TemplateChanged: true}
			d := decide(t, in)
			if d.Action() != decision.Deny {
				t.Errorf("the old object's status shows %d pod(s) on the replaced template B, the lagging cache none: "+
					"the edit to C is admitted as replacing a staged template, and A, B and C get live pods", status.Progress.Updated)
			}
		})
	}
}

// TestOnDeleteEditReadsTheStatusOverAnEmptyCache (rollout explorer, seed 10503 of 50,000):
// a DaemonSet re-created over pods of A with template B rolls one pod to B and is switched
// to OnDelete. Its edit to C comes within the cache's lag of the re-create, so the cache
// shows none of the pods it adopted: no other template has pods there, and the edit read as
// starting an OnDelete rollout was admitted. The stored status counts 1 of 3 pods on B and
// 2 on another: the next replaced pod made A, B and C live at once. Now it is "retry".
func TestOnDeleteEditReadsTheStatusOverAnEmptyCache(t *testing.T) {
	B, C := template("B", "3"), template("C", "3")
	settle := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{Rules: settle}}}
	for _, kind := range []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet, v1alpha1.KindStatefulSet} {
		t.Run(string(kind), func(t *testing.T) {
			status := workload.Rollout{OnDelete: true, Held: true, InProgress: true, Mixed: true,
				Progress: workload.Progress{Kind: kind, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}}
			in := Input{Operation: admissionv1.Update, Old: wl(kind, 3, B, status), New: wl(kind, 3, C, status), Now: now,
				Policies: policies, TemplateChanged: true}
			d := decide(t, in)
			if d.Action() != decision.Deny || !strings.Contains(d.Denial(), "retry in a few seconds") {
				t.Errorf("the status counts 1 of 3 pods on B and 2 on another, the cache none: the edit to C must wait for "+
					"the cache, got %v: %s", d.Action(), d.Denial())
			}
			// The cache shows B's pods, one terminating (a StatefulSet's status.replicas counts
			// it, updatedReplicas does not): read as it is, the edit starts an OnDelete rollout.
			terminating := status
			terminating.Progress.Updated, terminating.Progress.Total = 2, 3
			shown := in
			shown.Old, shown.New = wl(kind, 3, B, terminating), wl(kind, 3, C, terminating)
			shown.History = history.History{Revisions: []history.Revision{live(rev(1, B, time.Hour, 2), 3)}, LastActivity: now}
			if d := decide(t, shown); d.Action() != decision.Allow {
				t.Errorf("the cache shows B's 3 pods (1 terminating), no other template: the edit to C was refused: %s", d.Denial())
			}
			// Once every pod runs B (the status says so), the edit starts an OnDelete rollout.
			status.Progress.Updated, status.Mixed = 3, false
			in.Old, in.New = wl(kind, 3, B, status), wl(kind, 3, C, status)
			if d := decide(t, in); d.Action() != decision.Allow {
				t.Errorf("every pod runs B: the edit to C makes two templates at most, got %v: %s", d.Action(), d.Denial())
			}
		})
	}
}

// TestRefusalsNameStuckTerminatingPods: a pod on a node that stopped
// answering stays Terminating until the Node is deleted or the pod force-deleted, and Live
// counts it for as long. Two refusals then name ways out that do not exist:
//   - an OnDelete DaemonSet whose last pod of A is stuck Terminating (the operator deleted
//     it to replace it, as the refusal told him): every edit to a new template C is
//     refused ("return to A, or replace the pods of revision 1"); returning to A is
//     admitted, but from A an edit to C is refused again (A is the replaced template with
//     a live pod), and the pod of revision 1 cannot be replaced. checkStagedEdit has no
//     stall escape. Nothing names the stuck pod or a force delete;
//   - a Deployment whose A→B rollout has finished but whose old ReplicaSet keeps one
//     terminating pod: a flag-following scale is refused with "finish or roll back
//     first", yet the rollout has finished and a return to A is flapping (I3).
func TestRefusalsNameStuckTerminatingPods(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	stuck := func(r history.Revision) history.Revision { r.Live, r.Pods, r.Serving = 1, 0, 0; return r }
	t.Run("OnDelete DaemonSet", func(t *testing.T) {
		ds := v1alpha1.KindDaemonSet
		rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
		policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
		onDelete := workload.Rollout{OnDelete: true, Held: true, InProgress: true, Mixed: true,
			Progress: workload.Progress{Kind: ds, Updated: 3, Target: 4, Available: 3, Want: 4}}
		// An hour after the last pod activity: nothing is in progress.
		h := history.History{Revisions: []history.Revision{stuck(rev(1, A, 2*time.Hour, 0)), live(rev(2, B, time.Hour, 3), 3)},
			LastActivity: now.Add(-time.Hour)}
		var msgs []string
		reached := false
		for _, step := range []struct{ from, to *corev1PodTemplateSpec }{{B, C}, {B, A}, {A, C}} {
			in := Input{Operation: admissionv1.Update, Old: wl(ds, 4, step.from, onDelete), New: wl(ds, 4, step.to, onDelete), Now: now,
				History: h, Policies: policies, TemplateChanged: true}
			d := decide(t, in)
			for _, v := range d.Violations {
				msgs = append(msgs, v.Message)
			}
			if step.to == C && d.Action() != decision.Deny {
				reached = true
			}
		}
		if !reached && !containsAny(msgs, "erminating", "force") {
			t.Errorf("no edit reaches a new template, and no refusal names the pod stuck terminating:\n%s", strings.Join(msgs, "\n"))
		}
	})
	t.Run("Deployment scale after a finished rollout", func(t *testing.T) {
		dep := v1alpha1.KindDeployment
		B3, B4 := B, template("B", "4")
		rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
			RevertWindow:      &metav1.Duration{Duration: time.Hour},
			ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}
		policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
		done := workload.Rollout{Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
		j := jr(7, jrev(A, 2*time.Hour, 30*time.Minute, time.Hour), jrev(B3, 30*time.Minute, 0, 20*time.Minute))
		h := history.History{Revisions: []history.Revision{stuck(rev(1, A, 2*time.Hour, 0)), live(rev(2, B3, 30*time.Minute, 3), 3)},
			LastActivity: now.Add(-20 * time.Minute)}
		in := Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, B3, done), 7), New: gen(wl(dep, 4, B4, done), 8), Now: now,
			Journal: j, History: h, Policies: policies, TemplateChanged: true}
		d := decide(t, in)
		if d.Action() == decision.Deny {
			msg := d.Violations[0].Message
			back := decide(t, Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, B3, done), 7), New: gen(wl(dep, 3, A, done), 8), Now: now,
				Journal: j, History: h, Policies: policies, TemplateChanged: true})
			if !containsAny([]string{msg}, "erminating", "force") {
				t.Errorf("the scale after a finished rollout is refused with %q; the roll back it offers is refused too (%v); "+
					"the real way out (the old ReplicaSet's terminating pod) is not named", msg, summarize(back))
			}
		}
	})
}

type corev1PodTemplateSpec = corev1.PodTemplateSpec

func containsAny(msgs []string, subs ...string) bool {
	for _, m := range msgs {
		for _, s := range subs {
			if strings.Contains(m, s) {
				return true
			}
		}
	}
	return false
}

// TestStartDuringScaleRolloutAddsNoThirdTemplate: the reverse order of
// TestScaleDuringRolloutAddsNoThirdTemplate. A finished Deployment on A@3 is scaled with its
// flag to A@4 (admitted: one template has live pods); the Deployment controller rolls A@3
// to A@4 pod by pod. The journal keeps the revision's times across a scale (I4),
// Finished included, so the revision counts as finished while A@3 and A@4 both have pods,
// and I1 admits a new template C at once: A@3, A@4 and C have live pods.
func TestStartDuringScaleRolloutAddsNoThirdTemplate(t *testing.T) {
	A3, A4, C4 := template("A", "3"), template("A", "4"), template("C", "4")
	dep := v1alpha1.KindDeployment
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}},
		ArgsMatchReplicas: flags}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules}}}
	scaling := workload.Rollout{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: dep, Updated: 1, Target: 4, Available: 4, Want: 4, Total: 4}}

	// The journal as Observe leaves it after the scale: A's revision, its times kept, its
	// template now A@4's.
	ja := jrev(A4, time.Hour, 0, 50*time.Minute)
	ja.Shape, _ = workload.FromSpec(A3, "").Shape(flags)
	j := jr(8, ja)
	h := history.History{Revisions: []history.Revision{live(rev(1, A3, time.Hour, 3), 3), live(rev(2, A4, 10*time.Second, 1), 1)},
		LastActivity: now.Add(-5 * time.Second)}
	in := Input{Operation: admissionv1.Update, Old: gen(wl(dep, 4, A4, scaling), 8), New: gen(wl(dep, 4, C4, scaling), 9), Now: now,
		Journal: j, History: h, Policies: policies, TemplateChanged: true}
	d := decide(t, in)
	if d.Action() != decision.Deny {
		t.Errorf("a new template while a scale's rollout (A@3 -> A@4) is under way is admitted (starts=%v): A@3, A@4 and C get live pods", d.Starts)
	}
}

// TestNewDaemonSetCountsOnlyNodesItRunsOn: NodesFor counts the nodes a new
// DaemonSet's nodeSelector matches, "an upper bound" (node affinity and taints rule out
// more). An upper bound is not conservative when the policy's limit is a percentage and
// the DaemonSet's maxUnavailable absolute: the limit grows with the count, the DaemonSet's
// value does not. A GPU agent pinned by node affinity to 3 of 20 nodes, maxUnavailable 2,
// under a policy of 10%: against 20 nodes 10% is 2 and it passes; kube runs it on 3, where
// 10% is 1 and it takes 2 of 3 down at once. Admitted, the finding is then grandfathered
// on every UPDATE (the old object, with its status, has it too: I5 only forbids worse).
func TestNewDaemonSetCountsOnlyNodesItRunsOn(t *testing.T) {
	var objs []client.Object
	for i := range 20 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"pool": "general"}}}
		if i < 3 {
			n.Labels["pool"] = "gpu"
		}
		objs = append(objs, n)
	}
	r := fake.NewClientBuilder().WithObjects(objs...).Build()
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "gpu-agent"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu"}}}}}}}},
		},
	}
	two, tenPercent := intstr.FromInt32(2), intstr.FromString("10%")
	ds := wl(v1alpha1.KindDaemonSet, 0, tmpl, workload.Rollout{})
	ds.Strategy = workload.Strategy{Rolling: true, MaxUnavailable: &two}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"},
		Spec: v1alpha1.RolloutPolicySpec{Rules: v1alpha1.RolloutRules{Strategy: &v1alpha1.StrategyRule{MaxUnavailable: &tenPercent}}}}}
	in := Input{Operation: admissionv1.Create, New: ds, Policies: policies, Now: now}
	if !NeedsNodes(in) {
		t.Fatal("precondition: the webhook reads the nodes")
	}
	nodes, err := workload.NodesFor(context.Background(), r, &tmpl.Spec) // what readWorkloadState passes
	if err != nil {
		t.Fatal(err)
	}
	in.Nodes = nodes
	d := decide(t, in)
	if d.Action() != decision.Deny {
		t.Errorf("a new DaemonSet that will run on 3 nodes, maxUnavailable 2 (2 of 3 at once), is admitted under a 10%% limit: "+
			"NodesFor counted %d nodes (node affinity ignored), so 10%% resolved to %d", nodes, policy.Resolve(policy.MaxUnavailable, v1alpha1.KindDaemonSet, &tenPercent, nodes))
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

func mustWindows(t *testing.T, ws []v1alpha1.Window) policy.Windows {
	t.Helper()
	w, errs := policy.ParseWindows(ws)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return w
}
