package rollout

import (
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// checkSharedBudget holds a start while the workload's evictions under the shared
// DisruptionPolicy are in flight up to its budget, or within its cooldown.
func checkSharedBudget(in Input, p *v1alpha1.RolloutPolicy) []finding {
	b := in.Evictions[p.Name]
	if b.Policy == nil || in.Old == nil {
		return nil
	}
	spec := &b.Policy.Spec
	inFlight, last := b.InFlight(in.Now)
	limit := policy.Resolve(policy.DisruptionBudget, in.Old.Kind, spec.MaxUnavailable, in.Old.Expected)
	// The longer of the two waits is the one to name.
	var wait time.Duration
	var msg string
	if inFlight > 0 && inFlight >= limit {
		wait = budget.EvictionLapse + budget.MaxClockSkew - in.Now.Sub(last)
		msg = fmt.Sprintf("%s: %d of its pods' evictions under DisruptionPolicy %s are in flight, its whole budget of %d, which its rollouts share; "+
			"a rollout now would take more pods down beside the drain", in.New, inFlight, b.Policy.Name, limit)
	}
	if spec.Cooldown != nil && !last.IsZero() {
		if w := spec.Cooldown.Duration + budget.MaxClockSkew - in.Now.Sub(last); w > wait {
			wait = w
			msg = fmt.Sprintf("%s had a pod evicted %s ago under DisruptionPolicy %s, whose cooldown of %s its rollouts share",
				in.New, round(max(in.Now.Sub(last), 0)), b.Policy.Name, spec.Cooldown.Duration)
		}
	}
	if msg == "" {
		return nil
	}
	return []finding{{rule: budget.RuleSharedBudget, field: templatePath, message: fmt.Sprintf("%s; retry in %s", msg, round(max(wait, time.Second)))}}
}

// sharedPolicies are the policies with a sharedBudget that select the workload, on an
// UPDATE that may start a rollout.
func sharedPolicies(in *Input) []*v1alpha1.RolloutPolicy {
	if in.Old == nil || !MayStart(*in) {
		return nil
	}
	return selecting(in, func(r *v1alpha1.RolloutRules) bool { return r.SharedBudget != nil })
}

// readEvictionBudgets fills in.Evictions for the shared policies: each one's
// DisruptionPolicy from the cache, and the workload's group ledger from the API server,
// which it returns (nil when nothing is shared) to record the start in.
func (h *Handler) readEvictionBudgets(ctx context.Context, in *Input, shared []*v1alpha1.RolloutPolicy) (*budget.Group, error) {
	if len(shared) == 0 {
		return nil, nil
	}
	in.Evictions = map[string]budget.Evictions{}
	var group *budget.Group
	for _, p := range shared {
		name := p.Spec.Rules.SharedBudget.DisruptionPolicy
		dp := &v1alpha1.DisruptionPolicy{}
		if err := informer.Get(ctx, h.Reader, client.ObjectKey{Name: name}, dp); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("reading DisruptionPolicy %s: %w", name, err)
			}
			continue // none: nothing is shared
		}
		spec, err := in.Old.Template.Spec()
		if err != nil {
			return nil, fmt.Errorf("oldObject: %w", err)
		}
		if ok, err := h.Matcher.SelectsPods(dp.Spec.Targets, in.NamespaceLabels, spec.Labels); err != nil || !ok || dp.Spec.Suspend {
			continue
		}
		b := budget.Evictions{Policy: dp}
		if h.Ledgers != nil {
			if group == nil {
				g, err := h.Ledgers.ReadGroup(ctx, in.Old.UID)
				if err != nil {
					return nil, fmt.Errorf("%w; retry", err)
				}
				group = &g
			}
			b.Records = group.Records
		}
		in.Evictions[p.Name] = b
	}
	return group, nil
}

// recordBudgetStart writes the start into the workload's group ledger, which the eviction
// guard writes too (budget.Group.RecordRolloutStart).
func (h *Handler) recordBudgetStart(ctx context.Context, in *Input, group *budget.Group, s budget.Start) error {
	if group == nil {
		return nil
	}
	rs := budget.RolloutStart{Template: s.Template, At: s.At, By: s.By}
	for name, b := range in.Evictions {
		if b.Policy == nil {
			continue
		}
		if rs.RolloutPolicy == "" || name < rs.RolloutPolicy {
			rs.RolloutPolicy = name
		}
		rs.Budgets = append(rs.Budgets, b.Policy.Name)
	}
	if len(rs.Budgets) == 0 {
		return nil
	}
	slices.Sort(rs.Budgets)
	return group.RecordRolloutStart(ctx, h.Ledgers, rs)
}
