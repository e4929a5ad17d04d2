package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestReplacementOfAHeldPodStartsItsStagedTemplate: the eviction (or DELETE) of a pod of an
// OnDelete DaemonSet or StatefulSet whose current template no pod runs yet makes kube create
// that template's first pod (syncNodes; newVersionedStatefulSetPod), with no workload request
// to refuse: it is judged as the start of the staged template (minInterval, the windows,
// settle's third template; not the fleet limit: an OnDelete workload is not in flight).
// Once the template has pods it starts nothing.
func TestReplacementOfAHeldPodStartsItsStagedTemplate(t *testing.T) {
	A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
	freeze := []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: 59 * time.Minute}, Action: v1alpha1.WindowDeny}}
	settle := &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}
	policy := func(rules v1alpha1.RolloutRules, windows []v1alpha1.Window) []v1alpha1.RolloutPolicy {
		return []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{Rules: rules, Windows: windows}}}
	}
	for _, kind := range []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet, v1alpha1.KindStatefulSet} {
		held := workload.Rollout{OnDelete: true, Held: true, Progress: workload.Progress{Kind: kind, Target: 3, Available: 3, Want: 3, Total: 3}}
		// evict is the eviction of an A pod of the workload whose staged template is C, with
		// cPods pods of C and bPods of B live beside A's.
		evict := func(policies []v1alpha1.RolloutPolicy, bPods, cPods int32) Decision {
			j := jr(9, jrev(A, 2*time.Hour, 10*time.Minute, 100*time.Minute), jrev(B, 10*time.Minute, 0, -1))
			j.Kind, j.Held = kind, true
			h := history.History{Revisions: []history.Revision{live(rev(1, A, 2*time.Hour, 3-bPods-cPods), 3-bPods-cPods),
				live(rev(2, B, 10*time.Minute, bPods), bPods), live(rev(3, C, time.Minute, cPods), cPods)}}
			w := gen(wl(kind, 3, C, held), 9)
			w.Rollout.Progress.Updated = cPods
			return show(t, string(kind)+": evict an A pod", Input{Operation: admissionv1.Update, Old: w, New: w, Replaces: "agent-a1",
				Now: now, Journal: j, History: h, Policies: policies})
		}
		rulesOf := func(d Decision) (out []string) {
			for _, v := range d.Violations {
				out = append(out, v.Rule)
			}
			return out
		}
		if d := evict(policy(v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}, nil), 0, 0); !slices.Equal(rulesOf(d), []string{RuleMinInterval}) || !d.Starts {
			t.Errorf("%s: an eviction whose replacement is the staged template's first pod, 10 min after B: %v (starts %v), want minInterval's refusal", kind, d.Violations, d.Starts)
		}
		if d := evict(policy(v1alpha1.RolloutRules{}, freeze), 0, 0); !slices.Equal(rulesOf(d), []string{RuleWindow}) {
			t.Errorf("%s: the same eviction in a Deny window: %v, want the window's refusal", kind, d.Violations)
		} else if msg := d.Violations[0].Message; !strings.Contains(msg, "first pod of the staged template") {
			t.Errorf("%s: the window's refusal of an eviction does not say why: %q", kind, msg)
		}
		if d := evict(policy(v1alpha1.RolloutRules{Settle: settle}, nil), 1, 0); !slices.Contains(rulesOf(d), RuleSettle) {
			t.Errorf("%s: an eviction that gives a third template (A, B, then C) its first pod: %v, want settle's refusal", kind, d.Violations)
		}
		if d := evict(policy(v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Hour}}, freeze), 0, 1); len(d.Violations) != 0 || d.Starts {
			t.Errorf("%s: an eviction replaced by a pod of a template that has pods already: %v (starts %v), want nothing judged", kind, d.Violations, d.Starts)
		}
	}
}
