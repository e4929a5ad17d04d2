package budget

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

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
	// key on their nodes; read only when the policy has a topologyBudget or a cooldown.
	Pods    []Pod
	Domains []string
}

// LastEffective is when the newest admitted eviction that took effect, or may still, was
// admitted (LastEffective, read with any other replica's clock margin): once lapsed, one
// kube's PDB check refused holds the workload's rollouts no longer. Pods not read count as
// gone: every record counts.
func (e Evictions) LastEffective(now time.Time) (time.Time, bool) {
	running := func(uid types.UID) bool {
		return slices.ContainsFunc(e.Pods, func(p Pod) bool { return p.UID == uid && p.Running })
	}
	at, ok := LastEffective(e.Records, now, func(Eviction) time.Duration { return MaxClockSkew }, running, "")
	return at.Add(-MaxClockSkew), ok
}

// LastEffective is when, at the latest on the reading replica's clock, the newest admitted
// eviction took effect (its pod is gone, or running says it no longer runs) or may still
// (it has not lapsed: EvictionLapse after its time, moved by margin, how much later than it
// looks a record of the replica that wrote it may be). An eviction kube's own PDB check
// refused after holdfast admitted it leaves its pod running: once lapsed, it holds the
// group for no cooldown, of evictions or of rollouts. The records of pod skip do not count
// (a retried eviction does not wait for itself).
func LastEffective(records []Eviction, now time.Time, margin func(Eviction) time.Duration, running func(types.UID) bool, skip types.UID) (time.Time, bool) {
	var last time.Time
	found := false
	for _, r := range records {
		if skip != "" && r.UID == skip {
			continue
		}
		at := r.At.Add(margin(r))
		if effective := now.Sub(at) < EvictionLapse || !running(r.UID); effective && (!found || at.After(last)) {
			last, found = at, true
		}
	}
	return last, found
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
