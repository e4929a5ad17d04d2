package rollout

import (
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestAttackScaleBeforeTheStagedEditIsObserved: TestScaleOfAHeldStatefulSetStartsItsStagedTemplate
// judges a scale up of an OnDelete StatefulSet that makes the first pod of its staged
// template as a start (here: refused by the Deny window). A tenant sends the same two
// requests back to back (`kubectl apply` of C, then `kubectl scale --replicas=4`, the
// second through the scale subresource, decoded from the cache): the second's old object
// carries a status the StatefulSet controller wrote for the previous generation
// (observedGeneration 8 < 9, updatedReplicas 3: B's pods, then the update revision), and
// C has no ControllerRevision yet. startsStaged then reads "not observed" as "not a
// start" (p.Unobserved == 0 is required), so nothing is judged, and kube creates ordinal 3
// from C (newVersionedStatefulSetPod: OnDelete, the update revision) in the Deny window.
// The same scale a moment later is refused: the race was the way in. startsStaged now
// reads a status of an earlier generation as saying nothing of the staged template.
func TestScaleBeforeTheStagedEditIsObserved(t *testing.T) {
	B, C := template("B", "3"), template("C", "3")
	sts := v1alpha1.KindStatefulSet
	freeze := []v1alpha1.Window{{Name: "business-hours", Schedule: "0 9 * * 1-5", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules, Windows: freeze}}}
	j := jr(8, jrev(B, time.Hour, 0, 50*time.Minute))
	j.Kind, j.Held = sts, true
	h := history.History{Revisions: []history.Revision{live(rev(1, B, time.Hour, 3), 3)}}
	held := workload.Rollout{OnDelete: true, Held: true, Progress: workload.Progress{Kind: sts, Updated: 3, Target: 3, Available: 3, Want: 3, Total: 3}}
	// The staging edit B→C: admitted (it starts an OnDelete rollout, nothing runs C).
	staged := gen(wl(sts, 3, C, held), 9)
	if d := decide(t, Input{Operation: admissionv1.Update, Old: gen(wl(sts, 3, B, held), 8), New: staged, Now: now, Journal: j, History: h, Policies: policies}); len(d.Violations) != 0 {
		t.Fatalf("the staging edit was refused: %v", d.Violations)
	}
	// The scale, before the controller observed generation 9.
	stale := held
	stale.Progress.Unobserved = 9
	old := gen(wl(sts, 3, C, stale), 9)
	up := stale
	up.Progress.Want, up.Progress.Target, up.Progress.Unobserved = 4, 4, 10
	d := show(t, "OnDelete 3 → 4 before generation 9 is observed", Input{Operation: admissionv1.Update, Old: old, New: gen(wl(sts, 4, C, up), 10),
		Now: now, Journal: j, History: h, Policies: policies})
	if len(d.Violations) == 0 {
		t.Errorf("a scale up that makes the first pod of the staged template, sent before the controller observed the edit, is admitted in a Deny window")
	}
}
