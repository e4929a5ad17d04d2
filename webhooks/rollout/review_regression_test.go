package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// reviewPolicy: settle (stallAfter 10m, the default), a fleet limit of 1 with another
// workload in flight, and a Deny window open at `now` (12:00 UTC, "0 * * * *" for 30m).
func reviewPolicy(extra func(*v1alpha1.RolloutRules)) ([]v1alpha1.RolloutPolicy, map[string]Fleet) {
	rules := v1alpha1.RolloutRules{
		Settle:      &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 10 * time.Minute}},
		Concurrency: &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(1)},
	}
	if extra != nil {
		extra(&rules)
	}
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Mode: v1alpha1.ModeEnforce, Rules: rules,
		Windows: []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: 30 * time.Minute}, Action: v1alpha1.WindowDeny}},
	}}
	return []v1alpha1.RolloutPolicy{p}, map[string]Fleet{p.Name: {Selected: 9, InFlight: []string{"Deployment tenant-b/other"}}}
}

func rulesOf(d Decision) []string {
	var out []string
	for _, v := range d.Violations {
		out = append(out, v.Rule)
	}
	return out
}

// 1. A Deployment's own minReadySeconds makes a healthy rollout read as stalled.
//
// A→B is admitted (outside the window, fleet free) on a Deployment with
// minReadySeconds: 3600 (a spec field outside the template; the strategy lint only
// sets a minimum). kube surges B's first pod, which is Ready (it serves: Endpoints use
// Ready) but not available for an hour, so the ReplicaSet's availableReplicas stays 0
// and holdfast's journal records no progress. After stallAfter (10m) the rollout reads
// as stalled, and an edit to C passes as "the fix of a stalled rollout": past settle (I1),
// the third template (I7: A, B and C live), the Deny window (W1) and the fleet limit
// (F1). Same class as progressDeadlineSeconds: 1 (TestTinyProgressDeadlineIsNoStall): a
// workload's own setting opens the stall's way past every rule at will.
func TestReviewMinReadySecondsIsNoStall(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	policies, fleets := reviewPolicy(nil)
	// 3 A pods available; B's surged pod Ready 10m50s ago, not yet available (minReadySeconds 3600).
	rolling := workload.Rollout{InProgress: true, Mixed: true, ProgressDeadline: 2 * time.Hour,
		Progress: workload.Progress{Kind: dep, Updated: 1, Target: 3, Available: 3, Want: 3, Total: 4}}
	old := gen(wl(dep, 3, B, rolling), 7)
	old.Strategy.MinReadySeconds = 3600
	nw := gen(wl(dep, 3, C, rolling), 8)
	nw.Strategy.MinReadySeconds = 3600
	jB := jrev(B, 11*time.Minute, 0, -1) // current since 11m, unfinished, no pod ever available
	j := jr(7, jrev(A, 2*time.Hour, 11*time.Minute, 100*time.Minute), jB)
	h := history.History{Revisions: []history.Revision{
		live(rev(1, A, 2*time.Hour, 3), 3),
		live(rev(2, B, 11*time.Minute, 0), 1),
	}, LastActivity: now.Add(-(10*time.Minute + 50*time.Second))}
	in := Input{Operation: admissionv1.Update, Old: old, New: nw, Journal: j, History: h, Now: now,
		Policies: policies, Fleets: fleets, TemplateChanged: true}
	d := decide(t, in)
	t.Logf("edit B->C 11m into a healthy minReadySeconds rollout: action=%v violations=%v", d.Action(), d.Violations)
	if d.Action() != decision.Deny {
		t.Errorf("a healthy rollout slowed by the workload's own minReadySeconds passed as a stalled one: "+
			"C admitted beside A and B, in a Deny window, past the fleet limit (rules %v)", rulesOf(d))
	}
}

// 2. kube's ProgressDeadlineExceeded is read before the "no journal, every pod on the
// current template" guard (Timeline.Unjournaled), so a finished Deployment that lost a pod
// reads as stalled while no journal records it.
//
// kube 1.37: a finished Deployment (Progressing=True NewRSAvailable) is paused; a pod goes
// NotReady (or its replacement stays Pending); it is resumed while that pod is unavailable:
// checkPausedConditions writes Progressing=Unknown ResumedDeployReason, so syncRolloutStatus
// no longer treats it as complete (isCompleteDeployment needs NewRSAvailable), and after
// progressDeadlineSeconds without progress DeploymentTimedOut writes
// ProgressDeadlineExceeded. With no journal (lost, or retired while an administrator had
// the namespace relabelled out and just relabelled it in) the next edit passes as a fix.
// docs/invariants.md, Limits: "A workload no journal records ... all of whose pods run its
// current template is never read as a stalled rollout."
func TestReviewUnjournaledDeadlineExceededIsNoStall(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	dep := v1alpha1.KindDeployment
	policies, fleets := reviewPolicy(nil)
	lostOne := workload.Rollout{InProgress: true, DeadlineExceeded: true, ProgressDeadline: 10 * time.Minute,
		Progress: workload.Progress{Kind: dep, Updated: 3, Target: 3, Available: 2, Want: 3, Total: 3}}
	sumA, _ := workload.FromSpec(A, "").Sum()
	retired := &journal.Journal{Kind: dep, Namespace: "tenant-a", Name: "kube-apiserver", Generation: 4, Deleted: ptr.To(now.Add(-time.Minute)),
		Revisions: []journal.Revision{{Template: sumA, Since: now.Add(-2 * time.Hour), Progressed: now.Add(-2 * time.Hour), Finished: ptr.To(now.Add(-100 * time.Minute))}}}
	// The same guard misses a pod that is gone and not replaced (its replacement refused by
	// the namespace's ResourceQuota, or a pod admission webhook): status.replicas 2 of 3,
	// every pod on the template, Updated (2) < Target (3), no deadline needed.
	missing := workload.Rollout{InProgress: true, ProgressDeadline: 10 * time.Minute,
		Progress: workload.Progress{Kind: dep, Updated: 2, Target: 3, Available: 2, Want: 3, Total: 2}}
	for _, c := range []struct {
		name string
		j    *journal.Journal
		r    workload.Rollout
	}{{"no journal, deadline exceeded", nil, lostOne}, {"a retired journal, deadline exceeded", retired, lostOne},
		{"no journal, a pod not re-created", nil, missing}, {"a retired journal, a pod not re-created", retired, missing}} {
		name, j, lostOne := c.name, c.j, c.r
		in := Input{Operation: admissionv1.Update, Old: gen(wl(dep, 3, A, lostOne), 4), New: gen(wl(dep, 3, B, lostOne), 5), Now: now,
			TemplateChanged: true, Journal: j, Policies: policies, Fleets: fleets,
			// The pod went NotReady 15m ago: the newest pod activity.
			History: history.History{Revisions: []history.Revision{live(rev(1, A, 2*time.Hour, 2), 3)}, LastActivity: now.Add(-15 * time.Minute)},
		}
		d := decide(t, in)
		t.Logf("%s: action=%v violations=%v", name, d.Action(), d.Violations)
		if d.Action() != decision.Deny {
			t.Errorf("%s: a finished rollout that lost a pod, every pod on its template, passed as the fix of a stalled one "+
				"(past settle, the Deny window and the fleet limit)", name)
		}
	}
}

// 3. The stall clock runs while the workload is deleted (--cascade=orphan).
//
// A→B admitted before a Deny window; B's first pod becomes available; the tenant deletes
// the Deployment with --cascade=orphan (nothing rolls: both ReplicaSets keep their pods,
// healthy). The journal is retired with B unfinished, Available 1, Progressed at the
// delete. Observe restarts the clock of a re-created workload only when Available is 0.
// 10 minutes later, inside the Deny window, a CREATE of the same name with template C
// reads B as stalled: admitted as its fix, and kube's Deployment controller adopts A's and
// B's ReplicaSets and rolls C beside them (three templates live, a new image during the
// window). A pause (Held) stops the clock; an orphaning delete is the same hold.
func TestReviewOrphaningDeleteDoesNotStallARollout(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	policies, fleets := reviewPolicy(nil)
	jB := jrev(B, 13*time.Minute, 0, -1)
	jB.Available, jB.Progressed = 1, now.Add(-(12*time.Minute + 30*time.Second))
	j := deleted(jr(6, jrev(A, 2*time.Hour, 13*time.Minute, 100*time.Minute), jB), 12*time.Minute)
	j.UID = "old-uid"
	// What ReadAdoptable returns (replicas 3, maxSurge 1, maxUnavailable 0, deleted right
	// after kube scaled A's set down to 2): A's set at 2 (2 serving), B's at 1 (1
	// available): 3 of 3 serving, nothing pending, their pods idle since B's pod became
	// available.
	h := history.History{Revisions: []history.Revision{
		live(rev(1, A, 2*time.Hour, 2), 2),
		live(rev(2, B, 13*time.Minute, 1), 1),
	}, LastActivity: now.Add(-(12*time.Minute + 30*time.Second))}
	nw := gen(wl(dep, 3, C, workload.Rollout{}), 1)
	nw.UID = "new-uid"
	in := Input{Operation: admissionv1.Create, New: nw, Journal: j, History: h, Now: now, Policies: policies, Fleets: fleets}
	d := decide(t, in)
	t.Logf("re-create with C 12m after an orphaning delete mid-rollout: action=%v violations=%v", d.Action(), d.Violations)
	if d.Action() != decision.Deny {
		t.Errorf("a rollout frozen by an orphaning delete read as stalled: the re-create with a new template is admitted "+
			"in a Deny window over two templates (rules %v)", rulesOf(d))
	}
}

// 4. argsMatchReplicas smuggles a change that is not a flag: Shape blanks the token after
// every bare occurrence of the flag, while checkArgsMatchReplicas reads only the last.
//
// The container runs `sh -c 'exec /konnectivity-server $1 --server-count=$2' ...` style
// argv, or simply has the flag twice: "--server-count <token> --server-count=N". The
// token after the first, bare occurrence is not a --server-count value (the last wins),
// yet the shape blanks it: changing it together with replicas and the last flag passes as
// a scale (I4), in a Deny window, during another workload's rollout (fleet limit), with
// no minInterval.
func TestReviewScaleSmugglesANonFlagArgument(t *testing.T) {
	dep := v1alpha1.KindDeployment
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	policies, fleets := reviewPolicy(func(r *v1alpha1.RolloutRules) {
		r.ArgsMatchReplicas = flags
		r.MinInterval = &metav1.Duration{Duration: time.Hour}
	})
	mk := func(token, count string) *workload.Workload {
		t := template("A", count)
		c := &t.Spec.Containers[1]
		c.Command = []string{"/bin/sh", "-c", `exec /konnectivity-server "$1" "$2"`, "--server-count", token}
		c.Args = []string{"--server-count=" + count}
		n := int32(3)
		if count == "4" {
			n = 4
		}
		return wl(dep, n, t, workload.Rollout{})
	}
	old := gen(mk("--mode=safe", "3"), 3)
	nw := gen(mk("--mode=debug-open-admin-port", "4"), 4)
	sumA, _ := old.Template.Sum()
	shape, _ := old.Template.Shape(flags)
	j := jr(3, journal.Revision{Template: sumA, Shape: shape, Since: now.Add(-time.Minute), Progressed: now.Add(-time.Minute), Finished: ptr.To(now.Add(-30 * time.Second))})
	h := history.History{Revisions: []history.Revision{{Name: "rev-a", Number: 1, Template: old.Template, Created: now.Add(-time.Minute), Serving: 3, Pods: 3, Live: 3}}}
	in := Input{Operation: admissionv1.Update, Old: old, New: nw, Journal: j, History: h, Now: now, Policies: policies, Fleets: fleets}
	d := decide(t, in)
	t.Logf("scale 3->4 that also changes a non-flag argv token: action=%v violations=%v", d.Action(), d.Violations)
	if d.Action() != decision.Deny {
		t.Errorf("a template change beyond the flags passed as a scale (I4): admitted within minInterval, in a Deny window, past the fleet limit")
	}
}

// A re-create that adopts a deleted workload's finished rollout with a new template is a
// start: the fleet limit holds it as it holds an update (else an orphaning delete and a
// re-create walk past the limit). docs/fleet.md said "a CREATE is never refused" (found by
// review); a CREATE of fresh pods still is never refused.
func TestReviewRecreateWithANewTemplateIsHeldByTheFleetLimit(t *testing.T) {
	B, C := template("B", "3"), template("C", "3")
	dep := v1alpha1.KindDeployment
	policies, fleets := reviewPolicy(nil)
	policies[0].Spec.Windows = nil
	j := deleted(jr(6, jrev(B, 2*time.Hour, 0, 100*time.Minute)), 30*time.Second)
	j.UID = "old-uid"
	h := history.History{Revisions: []history.Revision{live(rev(2, B, 2*time.Hour, 3), 3)}, LastActivity: now.Add(-time.Hour)}
	nw := gen(wl(dep, 3, C, workload.Rollout{}), 1)
	d := decide(t, Input{Operation: admissionv1.Create, New: nw, Journal: j, History: h, Now: now, Policies: policies, Fleets: fleets})
	if !slices.Equal(rulesOf(d), []string{RuleConcurrency}) || !d.Starts {
		t.Errorf("a re-create with C over a finished B, the fleet full: %v (starts %v), want the fleet limit's refusal", d.Violations, d.Starts)
	}
	fresh := decide(t, Input{Operation: admissionv1.Create, New: nw, Now: now, Policies: policies, Fleets: fleets})
	if len(fresh.Violations) != 0 || fresh.Starts {
		t.Errorf("a CREATE of fresh pods, the fleet full: %v (starts %v), want admitted", fresh.Violations, fresh.Starts)
	}
}

// 6. history.ReadAdoptable reads the ReplicaSets a CREATE would adopt by the new pod
// template's labels (a ReplicaSet must carry every one of them), while kube's Deployment
// controller adopts every orphaned ReplicaSet its spec.selector matches
// (getReplicaSetsForDeployment, ClaimReplicaSets). A re-create that adds one label to the
// template (selector unchanged), under a new name so that no journal exists, adopts a
// rollout in progress (A and B live) and rolls C beside them, while holdfast sees a fresh
// workload: no settle, no third template, no window, no fleet limit, not even a start
// (Decision.Starts false: no ledger record).
func TestReviewAdoptableHistoryMissesWhatKubeAdopts(t *testing.T) {
	ctx := context.Background()
	policies, fleets := reviewPolicy(nil)
	var objs []client.Object
	rsOf := func(name, tag, number string, replicas, available int32) *appsv1.ReplicaSet {
		tmpl := template(tag, "3")
		tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = name
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, UID: types.UID(name), Labels: tmpl.Labels,
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Annotations:       map[string]string{"deployment.kubernetes.io/revision": number}},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Template: *tmpl, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}},
			Status: appsv1.ReplicaSetStatus{Replicas: replicas, AvailableReplicas: available, ReadyReplicas: available}}
		objs = append(objs, rs)
		for i := range replicas {
			objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: fmt.Sprintf("%s-%d", name, i), Labels: tmpl.Labels,
				CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
				OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
				Spec: tmpl.Spec, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}}})
		}
		return rs
	}
	// web was orphan-deleted mid-rollout A→B: A's set at 2, B's at 2 (1 available).
	rsOf("web-a", "A", "1", 2, 2)
	rsOf("web-b", "B", "2", 2, 1)
	reader := utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, objs...)
	create := func(extraLabel bool) (Decision, history.History) {
		tmpl := template("C", "3")
		if extraLabel {
			tmpl.Labels["track"] = "v2"
		}
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web-v2", Generation: 1},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kas"}}, Template: *tmpl}}
		w, err := workload.From(d)
		if err != nil {
			t.Fatal(err)
		}
		h, err := history.ReadAdoptable(ctx, reader, w)
		if err != nil {
			t.Fatal(err)
		}
		in := Input{Operation: admissionv1.Create, New: w, History: h, Now: now, Policies: policies, Fleets: fleets}
		return decide(t, in), h
	}
	same, hs := create(false)
	t.Logf("re-create, template labels as before: %d adoptable revisions, action=%v rules=%v starts=%v", len(hs.Revisions), same.Action(), rulesOf(same), same.Starts)
	more, hm := create(true)
	t.Logf("re-create, one template label added: %d adoptable revisions, action=%v rules=%v starts=%v", len(hm.Revisions), more.Action(), rulesOf(more), more.Starts)
	if more.Action() != decision.Deny {
		t.Errorf("a re-create that kube lets adopt a rollout in progress (A and B live) was admitted as a fresh workload: "+
			"ReadAdoptable found %d revisions where kube adopts 2", len(hm.Revisions))
	}
}
