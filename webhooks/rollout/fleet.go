package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
	// Selected counts the workloads the policy selects, this one included.
	Selected int
	// InFlight names the others whose rollouts are unfinished, stalled ones marked.
	InFlight []string
	// Starts are the policy's ledger, as read.
	Starts []budget.Start
}

// checkConcurrency holds a start while maxInFlight others are in flight.
func checkConcurrency(in Input, p *v1alpha1.RolloutPolicy) []finding {
	r := p.Spec.Rules.Concurrency
	f := in.Fleets[p.Name]
	limit := int(policy.Resolve(policy.MaxInFlight, "", &r.MaxInFlight, int32(f.Selected)))
	if len(f.InFlight) < limit {
		return nil
	}
	named := f.InFlight[:min(len(f.InFlight), maxNamed)]
	more := ""
	if len(f.InFlight) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(f.InFlight)-maxNamed)
	}
	return []finding{{rule: RuleConcurrency, field: templatePath, message: fmt.Sprintf(
		"%s: %d of the %d workloads the policy selects are rolling out (%s%s), and at most %s may at once; "+
			"retry in 30s, after one finishes; a rollback to the revision still serving, or the fix of a stalled rollout, is never held",
		in.New, len(f.InFlight), f.Selected, strings.Join(named, ", "), more, r.MaxInFlight.String())}}
}

// InFlight lists the workloads among selected whose rollouts are unfinished as their
// journals recorded them (journal.Unfinished), and those starts record that no journal
// shows yet, leaving out self; sorted.
func InFlight(p *v1alpha1.RolloutPolicy, selected []workload.Ref, journals *journal.Store, starts []budget.Start, self string, now time.Time) []string {
	seen := map[string]bool{self: true}
	var out []string
	for _, name := range journals.Unfinished(selected, journal.StallAfter(p.Spec.Rules.Settle), now) {
		if !seen[strings.TrimSuffix(name, journal.StalledMark)] {
			seen[strings.TrimSuffix(name, journal.StalledMark)] = true
			out = append(out, name)
		}
	}
	for _, s := range starts {
		if seen[s.Workload] || now.Sub(s.At) >= budget.StartLapse+budget.MaxClockSkew {
			continue
		}
		ref, ok := workload.ParseRef(s.Workload)
		if !ok {
			continue
		}
		if cur := journals.Get(ref.Kind, ref.Namespace, ref.Name).Current(); cur != nil && cur.Template == s.Template {
			continue // the journal shows it: counted above, or finished
		}
		seen[s.Workload] = true
		out = append(out, s.Workload)
	}
	slices.Sort(out)
	return out
}
