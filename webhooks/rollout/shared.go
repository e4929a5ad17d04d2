package rollout

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/cache"
	"github.com/holdfast-dev/holdfast/internal/ledger"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// RuleSharedBudget reports a start held because the workload's evictions use the budget
// its rollouts share (rules.sharedBudget).
const RuleSharedBudget = "sharedBudget"

// evictionSkew is how much older than it looks an eviction record may be: the replica
// that wrote it read another clock (eviction.MaxClockSkew).
const evictionSkew = 5 * time.Second

// EvictionBudget is what a policy's sharedBudget reads of the workload's evictions.
type EvictionBudget struct {
	// Policy is the DisruptionPolicy named, nil when it does not exist, is suspended or
	// does not select the workload's pods: then nothing is shared.
	Policy *v1alpha1.DisruptionPolicy
	// Records are the evictions admitted in the workload's group (its ledger).
	Records []ledger.Eviction
}

// checkSharedBudget holds a start while the workload's evictions under the shared
// DisruptionPolicy are in flight up to its budget, or within its cooldown.
func checkSharedBudget(in Input, p *v1alpha1.RolloutPolicy) []finding {
	b := in.Evictions[p.Name]
	if b.Policy == nil || in.Old == nil {
		return nil
	}
	spec := &b.Policy.Spec
	var inFlight int32
	var last time.Time
	for _, r := range b.Records {
		if in.Now.Sub(r.At) < ledger.EvictionLapse+evictionSkew {
			inFlight++
		}
		if r.At.After(last) {
			last = r.At
		}
	}
	budget := policy.Resolve(policy.DisruptionBudget, in.Old.Kind, spec.MaxUnavailable, in.Old.Expected)
	// The longer of the two waits is the one to name.
	var wait time.Duration
	var msg string
	if inFlight > 0 && inFlight >= budget {
		wait = ledger.EvictionLapse + evictionSkew - in.Now.Sub(last)
		msg = fmt.Sprintf("%s: %d of its pods' evictions under DisruptionPolicy %s are in flight, its whole budget of %d, which its rollouts share; "+
			"a rollout now would take more pods down beside the drain", in.New, inFlight, b.Policy.Name, budget)
	}
	if spec.Cooldown != nil && !last.IsZero() {
		if w := spec.Cooldown.Duration + evictionSkew - in.Now.Sub(last); w > wait {
			wait = w
			msg = fmt.Sprintf("%s had a pod evicted %s ago under DisruptionPolicy %s, whose cooldown of %s its rollouts share",
				in.New, round(max(in.Now.Sub(last), 0)), b.Policy.Name, spec.Cooldown.Duration)
		}
	}
	if msg == "" {
		return nil
	}
	return []finding{{rule: RuleSharedBudget, field: templatePath, message: fmt.Sprintf("%s; retry in %s", msg, round(max(wait, time.Second)))}}
}

// readEvictionBudgets fills in.Evictions for the policies with a sharedBudget that select
// the workload, on an UPDATE that may start a rollout: the DisruptionPolicy from the cache,
// and the group's ledger from the API server.
func (h *Handler) readEvictionBudgets(ctx context.Context, in *Input) error {
	if in.Old == nil || !MayStart(*in) {
		return nil
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		sb := p.Spec.Rules.SharedBudget
		if sb == nil || p.Spec.Suspend {
			continue
		}
		if selectsNew, selectedOld, err := selection(p, *in); err != nil || (!selectsNew && !selectedOld) {
			continue
		}
		if in.Evictions == nil {
			in.Evictions = map[string]EvictionBudget{}
		}
		dp := &v1alpha1.DisruptionPolicy{}
		if err := cache.Get(ctx, h.Reader, client.ObjectKey{Name: sb.DisruptionPolicy}, dp); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("reading DisruptionPolicy %s: %w", sb.DisruptionPolicy, err)
			}
			continue // none: nothing is shared (its status says so)
		}
		spec, err := in.Old.Template.Spec()
		if err != nil {
			return fmt.Errorf("oldObject: %w", err)
		}
		if ok, err := h.Matcher.SelectsPods(dp.Spec.Targets, in.NamespaceLabels, spec.Labels); err != nil || !ok || dp.Spec.Suspend {
			continue
		}
		b := EvictionBudget{Policy: dp}
		if h.LedgerReader != nil {
			lctx, cancel := context.WithTimeout(ctx, LedgerTimeout)
			l, err := ledger.Read[ledger.Eviction](lctx, h.LedgerReader, ledger.EvictionsKey(h.Namespace, in.Old.UID), ledger.EvictionsAnnotation)
			cancel()
			if err != nil {
				return fmt.Errorf("%w; retry", err)
			}
			b.Records = l.Records
		}
		in.Evictions[p.Name] = b
	}
	return nil
}
