package rollout

import (
	"slices"
	"testing"

	"github.com/holdfast-dev/holdfast/internal/decision"
)

// TestStateRulesListTheFleetForAStagedStart: the webhook judges the scale of a held
// OnDelete StatefulSet over a staged template by the fleet limit (startsNow), so StateRules
// (what `holdfast check` says it cannot decide offline) lists concurrency for it too:
// offline, with no fleet, it would otherwise report "admitted" with nothing undecided
// while the webhook refuses.
func TestStateRulesListTheFleetForAStagedStart(t *testing.T) {
	in, limited := stagedStartScale()
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
