package eviction

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
)

// sharedRolloutHold defers the eviction of a serving pod while its workload rolls out
// under a RolloutPolicy sharing this DisruptionPolicy's budget: a drain and a rollout never
// take the group's pods down together. A stalled rollout holds nothing.
func sharedRolloutHold(in Input, p *v1alpha1.DisruptionPolicy) (decision.Violation, bool) {
	r := in.Rollout
	if r == nil || !in.Pod.Ready || !slices.Contains(r.Budgets, p.Name) {
		return decision.Violation{}, false
	}
	return decision.Violation{Rule: budget.RuleSharedBudget, Wait: min(r.StallIn, MaxRetryAfter), Message: fmt.Sprintf(
		"%s is rolling out (since %s ago) under RolloutPolicy %s, which shares this policy's budget; pod %s waits until the rollout finishes, "+
			"or counts as stalled (in %s)", in.Group.Ref, max(in.Now.Sub(r.Since), 0).Round(time.Second), r.RolloutPolicy, in.Pod.Name, r.StallIn.Round(time.Second))}, true
}

// readSharedRollout fills in.Rollout when the group's workload has an unfinished, not
// stalled rollout (by its revision journal) under a RolloutPolicy with a sharedBudget.
func (h *Handler) readSharedRollout(ctx context.Context, in *Input) error {
	if in.Group == nil || h.Journals == nil {
		return nil
	}
	j := h.groupJournal(in)
	cur := j.Rolling()
	if cur == nil {
		return nil
	}
	var rollouts v1alpha1.RolloutPolicyList
	if err := informer.List(ctx, h.Reader, &rollouts); err != nil {
		return fmt.Errorf("listing RolloutPolicies: %w", err)
	}
	for i := range rollouts.Items {
		rp := &rollouts.Items[i]
		sb := rp.Spec.Rules.SharedBudget
		if sb == nil || rp.Spec.Suspend {
			continue
		}
		if ok, err := in.Matcher.Selects(rp.Spec.Targets, in.Group.Kind, in.NamespaceLabels, in.Group.Labels); err != nil || !ok {
			continue
		}
		stallIn := j.StallAfter(rp.Spec.Rules.Settle) - in.Now.Sub(cur.Progressed)
		if stallIn <= 0 {
			continue // stalled: it holds no drain
		}
		if in.Rollout == nil {
			in.Rollout = &budget.SharedRollout{RolloutPolicy: rp.Name, Since: cur.Since, StallIn: stallIn}
		}
		in.Rollout.Budgets = append(in.Rollout.Budgets, sb.DisruptionPolicy)
		in.Rollout.StallIn = min(in.Rollout.StallIn, stallIn)
	}
	return nil
}

// sharedStart holds the group's evictions for a start of its workload's rollout that the
// rollout guard recorded in the group's ledger and the journal does not show yet: the
// window between a start admitted by one replica and the leader's journal.
func (h *Handler) sharedStart(in *Input, s budget.RolloutStart) {
	if in.Rollout != nil || in.Group == nil {
		return
	}
	r, ok := s.Unjournaled(in.Now)
	if !ok {
		return
	}
	// The journal decides once it has observed the object the start was admitted for: a
	// CREATE continuing the rollout of a workload of its name deleted moments ago finds
	// that workload's journal, marked deleted (it rolls nothing out), with the template
	// current, until the leader observes the new object.
	j := h.groupJournal(in)
	if cur := j.Current(); cur != nil && cur.Template == s.Template && s.ObservedBy(j.UID, j.Generation) && j.Deleted == nil {
		return // the journal shows it: readSharedRollout decided
	}
	if j.Replaces(s.UID) {
		return // its object gone, the workload created in its place settled since
	}
	in.Rollout = &r
}

// groupJournal is the group's workload's revision journal, read once per request: the
// leader may write it between readSharedRollout, which found no rollout in it, and
// sharedStart, which would find the start shown in it and leave it to readSharedRollout
// (the start then held nothing, and a drain went on beside the rollout). Read once, an
// older journal leaves the start to hold the group until it shows it.
func (h *Handler) groupJournal(in *Input) *journal.Journal {
	if !in.journalRead {
		in.journal, in.journalRead = h.Journals.Get(in.Group.Kind, in.Group.Namespace, in.Group.Name), true
	}
	return in.journal
}
