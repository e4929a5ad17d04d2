package budget

import (
	"time"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// SharedRollout is what the eviction guard reads of a group's workload's rollout in
// flight under RolloutPolicies that share the budgets of the DisruptionPolicies named:
// while it rolls out, evictions of its serving pods wait.
type SharedRollout struct {
	// RolloutPolicy names the first such policy, for the message.
	RolloutPolicy string
	// Budgets are the DisruptionPolicies whose budgets the rollout shares.
	Budgets []string
	// Since is when the rollout's revision became current; StallIn how long until it
	// counts as stalled (and stops holding evictions).
	Since   time.Time
	StallIn time.Duration
}

// Unjournaled is the rollout a start recorded in the group's ledger holds while the
// workload's journal does not show it yet (the window between a start one replica
// admitted and the leader's journal); ok is false once it has lapsed. A journal that shows
// template current (the caller's check) decides instead.
func (s RolloutStart) Unjournaled(now time.Time) (r SharedRollout, ok bool) {
	age := now.Sub(s.At)
	if age >= StartLapse+MaxClockSkew {
		return SharedRollout{}, false
	}
	return SharedRollout{RolloutPolicy: s.RolloutPolicy, Budgets: s.Budgets, Since: s.At, StallIn: StartLapse + MaxClockSkew - age}, true
}

// Evictions is what the rollout guard reads of a workload's evictions under the
// DisruptionPolicy a RolloutPolicy's sharedBudget names: while they are in flight up to
// the budget, or within its cooldown, the workload's rollouts wait.
type Evictions struct {
	// Policy is the DisruptionPolicy named, nil when it does not exist, is suspended or
	// does not select the workload's pods: then nothing is shared.
	Policy *v1alpha1.DisruptionPolicy
	// Records are the evictions admitted in the workload's group (its ledger).
	Records []Eviction
	// Pods are the workload's pods and Domains the values of the policy's topologyBudget
	// key on their nodes; read only when the policy has a topologyBudget or a cooldown
	// (PodsRead).
	Pods     []Pod
	Domains  []string
	PodsRead bool
}

// LastEffective is when the newest admitted eviction that took effect, or may still, was
// admitted: one whose pod is gone or no longer running, or that has not lapsed
// (EvictionLapse and another replica's clock margin: the caches may not show its pod
// terminating yet). An eviction kube's own PDB check refused after holdfast admitted it
// leaves its pod running: once lapsed, it no longer holds the group's rollouts for a whole
// cooldown, as it no longer holds the group's evictions (the eviction guard's cooldown
// reads the ledger alike). Without Pods read, every record counts.
func (e Evictions) LastEffective(now time.Time) time.Time {
	var last time.Time
	for _, r := range e.Records {
		effective := !e.PodsRead || now.Sub(r.At) < EvictionLapse+MaxClockSkew
		if !effective {
			effective = true // gone, unless still present and running
			for _, p := range e.Pods {
				if p.UID == r.UID && p.Running {
					effective = false
				}
			}
		}
		if effective && r.At.After(last) {
			last = r.At
		}
	}
	return last
}

// InFlight counts the admitted evictions that still count against the group (not lapsed,
// read with any other replica's clock margin), and when the newest was admitted.
func (e Evictions) InFlight(now time.Time) (n int32, last time.Time) {
	for _, r := range e.Records {
		if now.Sub(r.At) < EvictionLapse+MaxClockSkew {
			n++
		}
		if r.At.After(last) {
			last = r.At
		}
	}
	return n, last
}
