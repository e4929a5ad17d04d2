package rollout

import (
	"context"
	"fmt"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// checkSharedBudget holds a start while the workload's evictions under the shared
// DisruptionPolicy are in flight up to its budget, or within its cooldown.
func checkSharedBudget(in Input, p *v1alpha1.RolloutPolicy) []finding {
	b := in.Evictions[p.Name]
	if b.Policy == nil || !sharesBudget(in) {
		return nil
	}
	spec := &b.Policy.Spec
	inFlight, last := b.InFlight(in.Now)
	w := sharing(in)
	limit := policy.Resolve(policy.DisruptionBudget, w.Kind, spec.MaxUnavailable, w.Expected)
	// The longer of the two waits is the one to name.
	var wait time.Duration
	var msg string
	if inFlight > 0 && inFlight >= limit {
		wait = budget.EvictionLapse + budget.MaxClockSkew - in.Now.Sub(last)
		msg = fmt.Sprintf("%s: %d of its pods' evictions under DisruptionPolicy %s are in flight, its whole budget of %d, which its rollouts share; "+
			"a rollout now would take more pods down beside the drain", in.New, inFlight, b.Policy.Name, limit)
	}
	if w, m := topologyWait(in, b); m != "" && w > wait {
		wait, msg = w, m
	}
	if at, ok := b.LastEffective(in.Now); spec.Cooldown != nil && ok {
		if w := spec.Cooldown.Duration + budget.MaxClockSkew - in.Now.Sub(at); w > wait {
			wait = w
			msg = fmt.Sprintf("%s had a pod evicted %s ago under DisruptionPolicy %s, whose cooldown of %s its rollouts share",
				in.New, round(max(in.Now.Sub(at), 0)), b.Policy.Name, spec.Cooldown.Duration)
		}
	}
	if msg == "" {
		return nil
	}
	return []finding{{rule: budget.RuleSharedBudget, field: templatePath, message: fmt.Sprintf("%s; retry in %s", msg, round(max(wait, time.Second)))}}
}

// topologyWait holds a start while pods of the workload that holdfast admitted down are not
// replaced yet in some topology domain of the shared policy's topologyBudget (budget.Disrupted),
// and the rollout, which counts as disrupting every domain where the workload has pods,
// would make more domains disrupted than the budget allows. It names the domains in flight
// and the latest time each frees.
func topologyWait(in Input, b budget.Evictions) (time.Duration, string) {
	tb := b.Policy.Spec.TopologyBudget
	if tb == nil {
		return 0, ""
	}
	key, limit, bound := tb.Resolved()
	disrupted := budget.Disrupted(b.Records, b.Pods, sharing(in).Expected, key, bound, in.Now, "")
	if len(disrupted) == 0 {
		return 0, ""
	}
	union := map[string]bool{}
	for _, d := range b.Domains {
		union[d] = true
	}
	var names []string
	var frees time.Time
	for d, t := range disrupted {
		union[d] = true
		names = append(names, d)
		if frees.IsZero() || t.Before(frees) {
			frees = t
		}
	}
	if len(union) <= limit {
		return 0, ""
	}
	slices.Sort(names)
	return frees.Sub(in.Now), fmt.Sprintf("%s: pods taken down under DisruptionPolicy %s are not replaced yet in %s %v (the first frees by %s at the latest), "+
		"and a rollout counts as disrupting every %s domain where the workload has pods (%d), over the policy's topologyBudget of %d",
		in.New, b.Policy.Name, key, names, frees.UTC().Format(time.RFC3339), key, len(b.Domains), limit)
}

// sharedPolicies are the policies with a sharedBudget that select the workload, on a
// request that may start a rollout: an UPDATE, or a CREATE over live pods it adopts (one
// of fresh pods has never served, and spends no shared budget).
func sharedPolicies(in *Input) []*v1alpha1.RolloutPolicy {
	if !sharesBudget(*in) {
		return nil
	}
	return selecting(in, func(r *v1alpha1.RolloutRules) bool { return r.SharedBudget != nil })
}

// sharesBudget is whether the request may start a rollout the shared budget judges.
func sharesBudget(in Input) bool {
	return startsNow(in) && (in.Operation != admissionv1.Create || len(liveRevisions(in.History)) > 0)
}

// sharing is the workload whose pods the shared budget counts: the stored one, or on a
// CREATE the one created, whose group is that of the workloads of its name before it
// (budget.GroupID) and whose status is empty (its pods and expected count as none).
func sharing(in Input) *workload.Workload {
	if in.Old != nil {
		return in.Old
	}
	return in.New
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
		w := sharing(*in)
		spec, err := w.Template.Spec()
		if err != nil {
			return nil, fmt.Errorf("the workload's template: %w", err)
		}
		if ok, err := h.Matcher.SelectsPods(dp.Spec.Targets, in.NamespaceLabels, spec.Labels); err != nil || !ok || dp.Spec.Suspend {
			continue
		}
		b := budget.Evictions{Policy: dp}
		if dp.Spec.TopologyBudget != nil || dp.Spec.Cooldown != nil {
			if b.Pods, b.Domains, err = h.workloadDomains(ctx, w.Ref, dp, in.Now); err != nil {
				return nil, fmt.Errorf("%w; retry", err)
			}
		}
		if h.Ledgers != nil {
			if group == nil {
				g, err := h.Ledgers.ReadGroup(ctx, budget.GroupID(w.Ref))
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
	rs := budget.RolloutStart{Template: s.Template, At: s.At, By: s.By, UID: s.UID, Generation: s.Generation}
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

// workloadDomains reads the workload's pods and, under a topology budget, the domains of
// its key where they run, from the caches: a node missing there disrupts no domain of its
// own (the eviction guard reads it from the API server when one of its pods is evicted).
// Without a topology budget the pods alone are read (whether an eviction took effect, for
// the cooldown: budget.Evictions.LastEffective).
func (h *Handler) workloadDomains(ctx context.Context, ref workload.Ref, dp *v1alpha1.DisruptionPolicy, now time.Time) ([]budget.Pod, []string, error) {
	pods, err := workload.PodsOf(ctx, h.Reader, ref)
	if err != nil {
		return nil, nil, err
	}
	settle := time.Duration(dp.Spec.MinReadySeconds) * time.Second
	if settle > 0 {
		settle += budget.MaxClockSkew
	}
	var key string
	if tb := dp.Spec.TopologyBudget; tb != nil {
		key, _, _ = tb.Resolved()
	}
	var domains []string
	of := map[string]string{} // node name to its domain, "" for none
	for _, p := range pods {
		if _, seen := of[p.Node]; seen || p.Node == "" || dp.Spec.TopologyBudget == nil {
			continue
		}
		node := &corev1.Node{}
		if err := informer.Get(ctx, h.Reader, client.ObjectKey{Name: p.Node}, node); client.IgnoreNotFound(err) != nil {
			return nil, nil, err
		}
		of[p.Node] = node.Labels[key]
	}
	for _, p := range pods {
		if d := of[p.Node]; d != "" && !p.Terminating && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	view := make([]budget.Pod, 0, len(pods))
	for _, p := range pods {
		view = append(view, budget.Pod{UID: p.UID, Created: p.Created, Available: p.Available(settle, now), Domain: of[p.Node],
			Running: !p.Terminating && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed})
	}
	return view, domains, nil
}
