package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// RuleConcurrency reports a start held by a policy's fleet-wide limit.
const RuleConcurrency = "concurrency"

// The fleet limit (rules.concurrency) counts the selected workloads whose rollouts are
// unfinished, from their revision journals, and the starts holdfast admitted that no
// journal shows yet, from the policy's fleet ledger (budget.Fleet).

// maxNamed is how many workloads in flight a message or a status names.
const maxNamed = 5

// Fleet is what a policy with a concurrency rule sees of the other workloads it selects.
type Fleet struct {
	// Selected counts the workloads the policy selects that have served, this one
	// included: what a percentage maxInFlight resolves against.
	Selected int
	// InFlight names the others whose rollouts hold slots, stalled ones marked.
	InFlight []string
	// Released names the others whose stalled rollouts no longer hold slots: stalled for
	// longer than stalledSlotLifetime. They are not counted.
	Released []string
	// Starts are the policy's ledger, as read.
	Starts []budget.Start
}

// The checks of the fleet limit, named apart from the rule they report under.
const (
	checkCap          = "concurrency/maxInFlightCap"
	checkPerNamespace = "concurrency/maxInFlightPerNamespace"
	checkSlotLifetime = "concurrency/stalledSlotLifetime"
)

// checkConcurrency holds a start while maxInFlight others are in flight, or
// maxInFlightPerNamespace others of its namespace.
func checkConcurrency(in Input, p *v1alpha1.RolloutPolicy, skip skipper) []finding {
	r := p.Spec.Rules.Concurrency
	f := in.Fleets[p.Name]
	if !skip.runs(checkCap) {
		uncapped := *r
		uncapped.MaxInFlightCap = nil
		r = &uncapped
	}
	if !skip.runs(checkSlotLifetime) {
		f.InFlight = append(slices.Clone(f.InFlight), f.Released...)
	}
	limit := Limit(r, f.Selected)
	if len(f.InFlight) >= limit {
		return []finding{{rule: RuleConcurrency, field: templatePath, message: fmt.Sprintf(
			"%s: %d of the %d workloads the policy selects that have served are rolling out (%s), and at most %d may at once (maxInFlight %s%s); "+
				"retry in 30s, after one finishes; a rollback to the revision still serving, or the fix of a stalled rollout, is never held",
			in.New, len(f.InFlight), f.Selected, named(f.InFlight), limit, r.MaxInFlight.String(), capped(r))}}
	}
	if r.MaxInFlightPerNamespace == nil || !skip.runs(checkPerNamespace) {
		return nil
	}
	var mine []string
	for _, name := range f.InFlight {
		if ref, ok := workload.ParseRef(strings.TrimSuffix(name, journal.StalledMark)); ok && ref.Namespace == in.New.Namespace {
			mine = append(mine, name)
		}
	}
	if len(mine) < int(*r.MaxInFlightPerNamespace) {
		return nil
	}
	return []finding{{rule: RuleConcurrency, field: templatePath, message: fmt.Sprintf(
		"%s: %d workloads of namespace %s are rolling out (%s), and at most %d of one namespace may at once (maxInFlightPerNamespace); "+
			"retry in 30s, after one finishes; a rollback to the revision still serving, or the fix of a stalled rollout, is never held",
		in.New, len(mine), in.New.Namespace, named(mine), *r.MaxInFlightPerNamespace)}}
}

// filled lists the policies among limited whose fleets a start just recorded under them
// fills: the others in flight as the decision read them were fewer than the limit, and
// with this one reach it. A start admitted into a fleet already full (a rollback, never
// held) fills nothing: a burst of rollbacks does not wake each other's requests again and
// again.
func filled(in *Input, limited []*v1alpha1.RolloutPolicy) []*v1alpha1.RolloutPolicy {
	var out []*v1alpha1.RolloutPolicy
	for _, p := range limited {
		f, ok := in.Fleets[p.Name]
		if limit := Limit(p.Spec.Rules.Concurrency, f.Selected); ok && len(f.InFlight) < limit && len(f.InFlight)+1 >= limit {
			out = append(out, p)
		}
	}
	return out
}

// Limit is maxInFlight resolved against the selected workloads that have served: a number
// as it is; a percentage rounded up, at least 1 and at most maxInFlightCap.
func Limit(r *v1alpha1.ConcurrencyRule, selected int) int {
	limit := int(policy.Resolve(policy.MaxInFlight, "", &r.MaxInFlight, int32(selected)))
	if c, ok := limitCap(r); ok {
		limit = min(limit, c)
	}
	return limit
}

// limitCap is maxInFlightCap where it applies: to a percentage maxInFlight only.
func limitCap(r *v1alpha1.ConcurrencyRule) (int, bool) {
	if r.MaxInFlight.Type == intstr.String && r.MaxInFlightCap != nil {
		return int(*r.MaxInFlightCap), true
	}
	return 0, false
}

// capped names the cap in a message, where one applies.
func capped(r *v1alpha1.ConcurrencyRule) string {
	if c, ok := limitCap(r); ok {
		return fmt.Sprintf(", at most %d", c)
	}
	return ""
}

// named lists the first maxNamed names, and how many more.
func named(names []string) string {
	out := strings.Join(names[:min(len(names), maxNamed)], ", ")
	if len(names) > maxNamed {
		out += fmt.Sprintf(" and %d more", len(names)-maxNamed)
	}
	return out
}

// Served counts the workloads among selected that have served (journal.Journal.Served),
// self (kind namespace/name) always.
func Served(selected []workload.Ref, journals *journal.Store, self string) int {
	return served(selected, journals, self)
}

func served(selected []workload.Ref, journals journal.Reader, self string) int {
	n := 0
	for _, w := range selected {
		if w.String() == self || journals.Get(w.Kind, w.Namespace, w.Name).Served() {
			n++
		}
	}
	return max(n, 1)
}

// testHookAfterSlots, when a test sets it, runs between InFlight's reads of the slots and of
// the starts: where the leader's write of a journal lands in a decision.
var testHookAfterSlots func()

// InFlight lists the workloads among selected whose rollouts hold slots as their journals
// recorded them (Slots, less those released), and those starts record that no journal
// shows yet, leaving out self; sorted. Released lists the stalled ones whose slots lapsed.
func InFlight(p *v1alpha1.RolloutPolicy, selected []workload.Ref, store *journal.Store, starts []budget.Start, self string, now time.Time) (out, released []string) {
	return inFlight(p, selected, store.Once(), starts, self, now)
}

// inFlight is InFlight with each journal read once: one the leader writes between the
// slots and the starts would otherwise count in neither (journal.Once).
func inFlight(p *v1alpha1.RolloutPolicy, selected []workload.Ref, journals *journal.Once, starts []budget.Start, self string, now time.Time) (out, released []string) {
	seen := map[string]bool{self: true}
	for _, s := range journals.FleetSlots(p, selected, now) {
		name := s.Ref.String()
		if seen[name] {
			continue
		}
		seen[name] = true
		if s.Released {
			released = append(released, s.Name())
		} else {
			out = append(out, s.Name())
		}
	}
	if testHookAfterSlots != nil {
		testHookAfterSlots()
	}
	for _, s := range starts {
		if seen[s.Workload] {
			continue
		}
		ref, ok := workload.ParseRef(s.Workload)
		if !ok {
			continue
		}
		j := journals.Get(ref.Kind, ref.Namespace, ref.Name)
		cur := j.Current()
		// The journal of the object the start was for, and whether it has seen the
		// admitted spec (a journal of a deleted workload of the name has not).
		observed := s.UID != "" && j != nil && j.UID == s.UID && j.Generation >= s.Generation
		// A StatefulSet's rollout that finished under the partition the start lowered: the
		// journal shows it again once the leader has seen the lowered spec (Observe reopens
		// it while ordinals roll), and until then the start counts.
		resumed := s.Lowered && !observed && cur != nil && cur.Finished != nil
		// Only a live journal of the name shows the start (a re-created workload's continues
		// its timeline): a deleted workload's, before the leader has seen its re-create, is
		// not counted above (Rolling), and the start counts until it does.
		live := j != nil && j.Deleted == nil
		// A flag-following scale since (I4) changed the template's fingerprint, not its
		// revision: the journal's current revision of the start's shape shows it, once the
		// journal has seen a spec after the start's (a later generation, or a workload of
		// the name created again). Before that the shape alone would drop the start of a
		// flags-only change (one that changes no replicas is judged a start, and kube rolls
		// it out as a new ReplicaSet) beside a revision the journal has finished.
		later := s.UID != "" && j != nil && (j.UID != s.UID || j.Generation > s.Generation)
		shows := cur != nil && (cur.Template == s.Template || (s.Shape != "" && cur.Shape == s.Shape && later))
		if live && shows && !j.Held && !resumed {
			continue // the journal shows it: counted above, finished, released or never served
		}
		if observed && j.Generation > s.Generation && (cur == nil || cur.Template != s.Template) {
			// The journal saw a later spec replace the started template (a return before
			// it got pods, say): kube makes no more of its pods, and what the workload
			// rolls out now is the journal's to count (above).
			continue
		}
		if live && s.UID != "" && j.UID != s.UID && cur != nil && cur.Template != s.Template && cur.Since.After(s.At.Add(budget.MaxClockSkew)) && !j.Held {
			// The same of a workload of the name created again since (another UID; its journal
			// continues the timeline): another template became current there after the start,
			// on the leader's clock, which may differ from the recording replica's. Not of the
			// object the start was for: a leader that lags dates an earlier spec's template
			// after the start, which that spec then replaced.
			continue
		}
		if j.Replaces(s.UID) {
			// The object the start was for is gone: the leader saw a workload of the name
			// created in its place and settled since, every pod its selector matches on its
			// one template. Of another template, kube makes no pod of the started one again
			// unless a request makes it current (a start of its own); of the same, its
			// rollout is over (a partition the start lowered on the deleted object, whose
			// lowered spec the journal will never see, included: seed 22500).
			continue
		}
		// A held workload's journal shows no slot (Rolling), yet kube creates the pods a
		// staged start began (a held StatefulSet grown over its staged template) all the
		// same: the start counts until it lapses, and while they keep coming up (the
		// journal's progress of that template) until it lapses after the last.
		since := s.At
		if cur != nil && cur.Template == s.Template && cur.Finished == nil && cur.Progressed.After(since) {
			since = cur.Progressed
		}
		if now.Sub(since) >= budget.StartLapse+budget.MaxClockSkew {
			continue
		}
		seen[s.Workload] = true
		out = append(out, s.Workload)
	}
	slices.Sort(out)
	return out, released
}
