package rollout

import (
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestStateRulesListTheFleetForAStagedStart: the webhook judges the scale of a held
// OnDelete StatefulSet over a staged template by the fleet limit (startsNow), so StateRules
// (what `holdfast check` says it cannot decide offline) lists concurrency for it too:
// offline, with no fleet, it would otherwise report "admitted" with nothing undecided
// while the webhook refuses.
func TestStateRulesListTheFleetForAStagedStart(t *testing.T) {
	A, B := template("A", "3"), template("B", "3")
	sts := v1alpha1.KindStatefulSet
	held := workload.Rollout{Held: true, OnDelete: true, Progress: workload.Progress{Kind: sts, Updated: 0, Target: 2, Available: 2, Want: 2, Total: 2}}
	grown := held
	grown.Progress.Want = 4
	hist := history.History{Revisions: []history.Revision{live(rev(1, A, time.Hour, 2), 2), rev(2, B, time.Minute, 0)}, LastActivity: now.Add(-time.Minute)}
	j := jr(9, jrev(A, time.Hour, 0, 50*time.Minute))
	j.Kind, j.Held = sts, true
	limited := fleetPolicy(intstr.FromInt32(1))
	in := Input{Operation: admissionv1.Update, Old: gen(wl(sts, 2, B, held), 9), New: gen(wl(sts, 4, B, grown), 10), Now: now, History: hist, Journal: j,
		User: authenticationv1.UserInfo{Username: "operator"}, Policies: []v1alpha1.RolloutPolicy{limited},
		Fleets: map[string]Fleet{limited.Name: {Selected: 9, InFlight: []string{"Deployment t1/kube-apiserver"}}}}
	if d := decide(t, in); d.Action() != decision.Deny {
		t.Fatalf("precondition: the webhook refuses it: %v", d.Violations)
	}
	rules, err := StateRules(&limited, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StateRules: %v", rules)
	if !slices.Contains(rules, RuleConcurrency) {
		offline := in
		offline.Fleets = nil
		d := decide(t, offline)
		t.Errorf("StateRules omits %s for a startsStaged scale; decided offline with no fleet: action %v", RuleConcurrency, d.Action())
	}
}
