package rollout

import (
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// A rule's verdict on a request reads either the request's two objects alone (strategy,
// argsMatchReplicas, selection, targets; the mode and exemptions read the clock only for
// temporary exemptions) or, besides them, the cluster's state: the revision journal and
// history, the fleet and group ledgers. Offline tools (holdfast check) decide the first
// kind from manifests and the second only with what the handler reads (Handler.ReadState);
// StateRules says which rules of a policy are of the second kind for a request.

// StateReads is what each rule that reads the cluster's state reads of it, for messages
// that say why a rule was not decided without it.
var StateReads = map[string]string{
	RuleSettle:              "whether the workload's current rollout has finished and which templates have live pods, from its revision journal and history",
	RuleMinInterval:         "when the workload's current revision became current, from its revision journal and history",
	RuleRevertWindow:        "the workload's earlier revisions and when they stopped being current, from its revision journal and history",
	RuleWindow:              "whether the change starts a rollout (a rollback or the fix of a stalled rollout passes), from the workload's revision journal and history",
	RuleConcurrency:         "the rollouts in flight among the workloads the policy selects, from their revision journals and the policy's fleet ledger",
	budget.RuleSharedBudget: "the evictions of the workload's pods, from its group's ledger and the DisruptionPolicy",
}

// ReadsOf is what a rule reads of the cluster's state when StateRules names it: StateReads,
// or for strategy the nodes a new DaemonSet runs on (strategy otherwise reads the request
// alone, so it is not in StateReads).
func ReadsOf(rule string) string {
	if rule == RuleStrategy {
		return "how many nodes a new DaemonSet runs on, which its percentages resolve against, from the cluster's nodes"
	}
	return StateReads[rule]
}

// RevisionRules are the rules of StateReads that read only the workload's own revisions
// (its journal and history, and the clock): a tool given the workload's ReplicaSets or
// ControllerRevisions decides them as the webhook does when it has no journal.
var RevisionRules = []string{RuleSettle, RuleMinInterval, RuleRevertWindow, RuleWindow}

// StateRules names the rules of p whose verdict on the request reads the cluster's state,
// when p applies to the request (not suspended, selecting the old or the new object, the
// requester not exempt): those p enables, of StateReads, when the request may start a
// rollout (MayStart) other than by a scale (I4, which starts nothing), or grows a held
// StatefulSet (growsHeld: concurrency and sharedBudget aside); settle, which counts
// the templates with live pods, for an OnDelete workload's template edit and for a scale
// whose flags change the template (templates.go); strategy, for a new DaemonSet whose
// percentages resolve against the nodes it runs on (NeedsNodes). None otherwise, and then
// Decide decides every rule of p from the request alone. sharedBudget reads the group's
// ledger on a CREATE over live pods too: that of the workloads of its name before it
// (budget.GroupID). The error is Decide's: a template that does not decode.
func StateRules(p *v1alpha1.RolloutPolicy, in Input) ([]string, error) {
	if p.Spec.Suspend {
		return nil, nil
	}
	if exempt, grant := policy.ExemptAt(p.Spec.Exemptions, in.User, in.Now); exempt && grant == nil {
		return nil, nil
	}
	if selectsNew, selectedOld, _ := selection(p, in); !selectsNew && !selectedOld {
		return nil, nil // a policy that selects nothing (or cannot be evaluated) reads nothing
	}
	r := &p.Spec.Rules
	var out []string
	if readsNodes(p, in) {
		out = append(out, RuleStrategy)
	}
	scale := false
	if in.Operation == admissionv1.Update && in.TemplateChanged {
		var err error
		if scale, err = isScale(in.Old, in.New, flagsOf(in)); err != nil {
			return nil, err
		}
	}
	// A request that grows a held StatefulSet may start its staged template (startsStaged):
	// whether it does, the cluster's pods say.
	grows := growsHeld(in) || growsBelowPartition(in)
	if (!MayStart(in) || (scale && !liftsHold(in))) && !grows {
		if r.Settle != nil && (stagesEdit(in) || createsHeld(in) || scale) {
			out = append(out, RuleSettle)
		}
		return out, nil
	}
	for _, c := range []struct {
		rule string
		set  bool
	}{
		{RuleSettle, r.Settle != nil},
		{RuleMinInterval, r.MinInterval != nil},
		{RuleRevertWindow, r.RevertWindow != nil},
		{RuleWindow, len(p.Spec.Windows) > 0},
		{RuleConcurrency, r.Concurrency != nil && startsNow(in)},
		{budget.RuleSharedBudget, r.SharedBudget != nil && sharesBudget(in)},
	} {
		if c.set {
			out = append(out, c.rule)
		}
	}
	return out, nil
}

// Without is p without the rules named (of StateReads): Decide with it never reads what
// only they read.
func Without(p v1alpha1.RolloutPolicy, rules ...string) v1alpha1.RolloutPolicy {
	if len(rules) == 0 {
		return p
	}
	p.Spec = *p.Spec.DeepCopy()
	r := &p.Spec.Rules
	for _, rule := range rules {
		switch rule {
		case RuleSettle:
			r.Settle = nil
		case RuleMinInterval:
			r.MinInterval = nil
		case RuleRevertWindow:
			r.RevertWindow = nil
		case RuleWindow:
			p.Spec.Windows = nil
		case RuleConcurrency:
			r.Concurrency = nil
		case budget.RuleSharedBudget:
			r.SharedBudget = nil
		case RuleStrategy:
			r.Strategy = nil
		}
	}
	return p
}

// RulesOf names the rules p enables, in the order Decide reports them, for reports that
// give a result per rule.
func RulesOf(p *v1alpha1.RolloutPolicy) []string {
	r := &p.Spec.Rules
	var out []string
	add := func(rule string, set bool) {
		if set {
			out = append(out, rule)
		}
	}
	add(RuleArgsMatchReplicas, len(r.ArgsMatchReplicas) > 0)
	add(RuleStrategy, r.Strategy != nil)
	add(RuleSettle, r.Settle != nil)
	add(RuleMinInterval, r.MinInterval != nil)
	add(RuleRevertWindow, r.RevertWindow != nil)
	add(RuleWindow, len(p.Spec.Windows) > 0)
	add(RuleConcurrency, r.Concurrency != nil)
	add(budget.RuleSharedBudget, r.SharedBudget != nil)
	return out
}

// readsNodes is a new DaemonSet (NeedsNodes) whose strategy rule resolves its limits, and
// the DaemonSet's maxUnavailable and maxSurge, against the nodes it runs on.
func readsNodes(p *v1alpha1.RolloutPolicy, in Input) bool {
	rule := p.Spec.Rules.Strategy
	if rule == nil || !NeedsNodes(in) {
		return false
	}
	// Absolute values read them too: what a rollout takes down is capped at the pods it has.
	return rule.MaxUnavailable != nil || rule.DaemonSetSurge
}
