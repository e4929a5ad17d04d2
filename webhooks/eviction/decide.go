// Package eviction is the eviction guard: a validating webhook on the pods/eviction
// subresource that defers (429) evictions which would take too many pods of a group
// down at once, too soon after the last one, or before the replacement has settled.
package eviction

import (
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Rule names, as they appear in messages and metrics.
const (
	RuleMaxUnavailable = "maxUnavailable"
	RuleCooldown       = "cooldown"
	// RuleWindow defers evictions while the policy's windows hold changes.
	RuleWindow = "window"
	// RuleExemption records an eviction a temporary exemption let through.
	RuleExemption = decision.RuleExemption
	// RuleMaxHold records an eviction admitted because its hold had lasted maxHold under
	// afterMaxHold Release: what holdfast's own holds would have said, on record.
	RuleMaxHold = "maxHold"
)

// MaxRetryAfter caps the retry-after holdfast suggests: client-go silently retries a 429
// that carries Retry-After up to 10 times, so a long one would stall the caller unseen.
// The real wait goes in the message.
const MaxRetryAfter = 10 * time.Second

// Input is everything an eviction decision reads, gathered by the handler.
type Input struct {
	Pod             workload.Pod
	PodLabels       map[string]string
	NamespaceLabels map[string]string
	// Group is nil for pods whose owner holdfast does not guard. GroupLive is a Group whose
	// pods were read from the API server (Handler.confirmLive), not the cache.
	Group     *workload.Group
	GroupLive bool
	Records   []budget.Eviction
	Policies  []v1alpha1.DisruptionPolicy
	// Matcher evaluates the policies' targets; nil compiles their selectors anew.
	Matcher *policy.Matcher
	User    authenticationv1.UserInfo
	// Rollout is the group's workload's rollout in flight under a RolloutPolicy that shares
	// a DisruptionPolicy's budget; nil when there is none.
	Rollout *budget.SharedRollout
	// journal is the group's workload's revision journal as the request first read it, and
	// journalRead whether it has (Handler.groupJournal).
	journal     *journal.Journal
	journalRead bool
	// Identity is this replica's, as it signs records; Now is its clock.
	Identity string
	Now      time.Time
	// Delete is a DELETE of the pod rather than its eviction: only the policies with
	// guardDeletes apply, and a pod that serves nothing is never held.
	Delete bool
	// NodeLost is a pod on a node the node lifecycle controller has tainted not-ready,
	// unreachable or out of service: deleting it is the documented recovery.
	NodeLost bool
	// Held is how long each policy has deferred the pod's evictions on this replica without
	// a break (Holds), by policy name; a policy absent holds none. A policy with
	// afterMaxHold Release lets its own holds go once its own hold reaches maxHold.
	Held map[string]time.Duration
	// Domains are the pod's node's values of the policies' topologyBudget keys, by key;
	// a key the node lacks is absent (the pod is in no domain of it).
	Domains map[string]string
	// NodeDomains are the topologyBudget keys' values of the nodes the group's pods run on,
	// by node name, then key: how a domain is told whole again (budget.Disrupted). Read
	// only when the pod is in a domain.
	NodeDomains map[string]map[string]string
}

// margin is how much older than it looks a record may be, read on this replica's clock.
func (in Input) margin(r budget.Eviction) time.Duration {
	return budget.Margin(in.Identity, r.By)
}

// SameRequest is how long after this replica admitted a pod's eviction it takes a new
// decision about it for the same request decided again (two of holdfast's webhook entries
// match one request, each within the webhook's timeout).
const SameRequest = 3 * time.Second

// Recorded is whether the group's ledger already holds this pod's admitted eviction from
// the same request, by this replica: it needs no second record. A later retry, or one
// another replica decides (whose clock may differ by more than SameRequest), is recorded
// anew: kube's PDB check, which runs after the webhook, may have refused the eviction
// holdfast admitted, and the pod goes only now, so the cooldown and the budget count it
// from now. A record written again changes nothing else: a pod's own records never hold it.
func (in Input) Recorded() bool {
	for _, r := range in.Records {
		if r.UID == in.Pod.UID && r.By == in.Identity && in.Now.Sub(r.At) < SameRequest {
			return true
		}
	}
	return false
}

// Decision is the outcome of every applicable policy.
type Decision struct {
	decision.Violations
	// Guarded is true when at least one policy selected the pod and applied to it.
	Guarded bool
	// Applied names the policies that selected the pod and applied to the request, in the
	// order of Input.Policies: the metrics count the request once under each.
	Applied decision.Applied
	// Counts is a guarded eviction of a Ready pod: it takes a pod down, so once admitted it
	// is recorded, counts against the budget until the pod is gone, and starts the cooldown.
	// Evicting a pod that is not Ready takes nothing down (E3).
	Counts bool
	// UsesRecords is a decision a policy made with the group's records of admitted
	// evictions: one about a Ready pod, or a not-Ready one under IfHealthyBudget. Without
	// it the ledger need not be read.
	UsesRecords bool
	// Released is an eviction some policy would have deferred by its own holds and let go
	// because the pod's hold had lasted its maxHold (afterMaxHold Release), recorded as a
	// RuleMaxHold finding.
	Released bool
	// Retry is holdfast's own deferral (retryLater): the decision could not be made or
	// recorded now. It holds the pod for every policy that applies, under selfHold.
	Retry bool
}

// Decide evaluates every DisruptionPolicy that selects the pod. It does no I/O.
func Decide(in Input) Decision {
	var d Decision
	// kube's eviction code never guards these, and neither does holdfast.
	if in.Pod.Terminating || in.Pod.Phase == corev1.PodSucceeded || in.Pod.Phase == corev1.PodFailed || in.Pod.Phase == corev1.PodPending {
		return d
	}
	// A delete of a pod that serves nothing takes nothing down, whatever
	// unhealthyPodEvictionPolicy says: the force delete of a stuck pod, or of one on a dead
	// node, is how it is recovered.
	if in.Delete && (!in.Pod.Ready || in.NodeLost) {
		return d
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		if p.Spec.Suspend || in.Delete && !p.Spec.GuardDeletes {
			continue
		}
		exempt, grant := policy.ExemptAt(p.Spec.Exemptions, in.User, in.Now)
		action := decision.ActionFor(p.Spec.Mode)
		// A selector that cannot be evaluated (stored while the policy webhook was down)
		// selects nothing: one broken policy must not defer every eviction in the cluster.
		// Its status is Ready=False and alerts (HoldfastPolicyNotInForce).
		ok, _ := in.Matcher.SelectsPods(p.Spec.Targets, in.NamespaceLabels, in.PodLabels)
		if !ok || in.Group == nil {
			continue // Pods of other owners are not guarded.
		}
		if exempt && grant == nil {
			// The policy never applies to an exempt requester, but a Ready pod it takes
			// down is down for everyone else's evictions: it is recorded as any other, so
			// that a replica whose cache has not seen it go yet counts it (E1).
			d.Counts = d.Counts || in.Pod.Ready
			continue
		}
		d.Guarded = true
		d.Applied.Add(p.Name)
		d.Counts = d.Counts || in.Pod.Ready
		d.UsesRecords = d.UsesRecords || in.Pod.Ready || !alwaysAllows(&p.Spec)
		found := check(in, &p.Spec, false)
		if v, held := sharedRolloutHold(in, p); held {
			found = append(found, v)
		}
		if v, held := topologyHold(in, &p.Spec); held {
			found = append(found, v)
		}
		// Only an enforced policy holds, and so only its holds are released.
		if len(found) > 0 && grant == nil && action == decision.Deny && releases(in, p.Name, &p.Spec) {
			// The hold has lasted maxHold: only the budget, as kube's PDB counts it, still
			// defers. What the policy's own holds said goes on record.
			if kept := check(in, &p.Spec, true); len(kept) > 0 {
				found = kept
			} else {
				d.Violations = append(d.Violations, released(p, in.heldBy(p.Name), found))
				d.Released = true
				continue
			}
		}
		if grant != nil {
			// A temporary exemption lets it through: on record, with its reason.
			if len(found) > 0 {
				d.Violations = append(d.Violations, exempted(p.Name, grant, found))
			}
			continue
		}
		for _, v := range found {
			v.Policy, v.Action = p.Name, action
			d.Violations = append(d.Violations, v)
		}
	}
	d.Violations.SortByPolicy()
	return d
}

// check applies one policy's budget and cooldown to the eviction. A released hold
// (afterMaxHold Release, past maxHold) is checked against the budget alone, as kube's
// PodDisruptionBudget counts it: pods Ready now, the evictions in flight, the policy's
// maxUnavailable; no window, cooldown, minReadySeconds or requester entry (but a
// requester's budget written as zero, which refuses rather than holds).
func check(in Input, spec *v1alpha1.DisruptionPolicySpec, release bool) []decision.Violation {
	g := in.Group
	minReady := time.Duration(spec.MinReadySeconds) * time.Second
	if release {
		minReady = 0
	}
	// Readiness is stamped on the node's clock and measured on this replica's: a pod
	// counts as settled once it has been Ready for minReadySeconds on either.
	settle := minReady
	if settle > 0 {
		settle += budget.MaxClockSkew
	}
	available, soonest := availability(g, settle, in.Now)
	pending := pendingRecords(in, settle)
	unavailable := g.Expected - available + pending
	budget := policy.Resolve(policy.DisruptionBudget, g.Kind, spec.MaxUnavailable, g.Expected)
	forbids := writtenZero(g.Kind, spec.MaxUnavailable)
	cooldown, whose := spec.Cooldown, ""
	// A requester entry tightens the budget and the cooldown for the identities it names;
	// it never loosens them.
	if r := policy.RequesterFor(spec.Requesters, in.User); r != nil && release {
		forbids = forbids || writtenZero(g.Kind, r.MaxUnavailable)
		if forbids {
			budget = 0
		}
	} else if r != nil {
		whose = fmt.Sprintf(" for %s", in.User.Username)
		if r.MaxUnavailable != nil {
			// A negative number (the schema checks only the percentage's form) forbids, as 0.
			budget = max(0, min(budget, policy.Resolve(policy.DisruptionBudget, g.Kind, r.MaxUnavailable, g.Expected)))
			forbids = forbids || writtenZero(g.Kind, r.MaxUnavailable)
		}
		if r.Cooldown != nil && (cooldown == nil || r.Cooldown.Duration > cooldown.Duration) {
			cooldown = r.Cooldown
		}
	}
	self := in.Pod.Available(settle, in.Now)
	alwaysAllow := alwaysAllows(spec)

	if !in.Pod.Ready && alwaysAllow {
		return nil // A pod that is not Ready serves nothing; evicting it takes nothing down (E3).
	}
	var out []decision.Violation
	// Windows hold changes: the eviction of a pod that serves nothing changes nothing and
	// passes in every window, under IfHealthyBudget too (the budget alone decides it).
	if v, held := windowHold(in, spec); held && in.Pod.Ready && !release {
		out = append(out, v)
	}
	switch {
	case budget == 0 && in.Pod.Ready && (forbids || g.Expected > 0):
		// A percentage of a group that expects no pods (a DaemonSet whose status has not
		// counted its pods yet, a StatefulSet scaled to 0) is 0 as well, but forbids
		// nothing: every pod left is surplus, and kube's PDB arithmetic admits its eviction.
		out = append(out, decision.Violation{Rule: RuleMaxUnavailable, Never: true, Message: fmt.Sprintf(
			"%s allows no pod to be unavailable%s (maxUnavailable %d of %d); pod %s cannot be evicted while the policy holds",
			g.Ref, whose, budget, g.Expected, in.Pod.Name)})
	case self && unavailable+1 > budget, !self && unavailable > budget:
		// A pod that is not Ready goes, under IfHealthyBudget, once the group is within its
		// budget without it: not now, as kube answers, however small the budget.
		wait := soonest
		msg := fmt.Sprintf("%s has %d of %d pods unavailable (%d evictions in flight) and allows %d%s; "+
			"pod %s must wait for a replacement to be Ready", g.Ref, unavailable, g.Expected, pending, budget, whose, in.Pod.Name)
		if minReady > 0 {
			msg += fmt.Sprintf(" for %s", minReady)
		}
		if wait > 0 {
			msg += fmt.Sprintf(" (the next settles in %s)", wait.Round(time.Second))
		}
		out = append(out, decision.Violation{Rule: RuleMaxUnavailable, Wait: wait, Message: msg})
	}
	// The cooldown spaces the evictions of pods that serve (E2); one that is not Ready
	// takes nothing down and does not wait.
	if cooldown != nil && in.Pod.Ready && !release {
		if last, ok := lastEffective(in); ok {
			if wait := cooldown.Duration - in.Now.Sub(last); wait > 0 {
				out = append(out, decision.Violation{Rule: RuleCooldown, Wait: wait, Message: fmt.Sprintf(
					"%s had a pod evicted %s ago; evictions in the group are at least %s apart%s; retry in %s",
					g.Ref, max(in.Now.Sub(last), 0).Round(time.Second), cooldown.Duration, whose, wait.Round(time.Second))})
			}
		}
	}
	return out
}

// writtenZero is a budget written as no pod at all (0, a negative number, "0%"): it
// forbids evictions whatever the group's size, where a percentage only resolves to 0 for a
// group that expects no pods.
func writtenZero(kind v1alpha1.WorkloadKind, v *intstr.IntOrString) bool {
	return v != nil && policy.Resolve(policy.DisruptionBudget, kind, v, 100) <= 0
}

// alwaysAllows is a policy whose pods that are not Ready may always be evicted (the
// default, as for the PDBs it generates).
func alwaysAllows(spec *v1alpha1.DisruptionPolicySpec) bool {
	return spec.UnhealthyPodEvictionPolicy == nil || *spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow
}

// availability counts the group's available pods: Ready for at least minReady and not
// terminating. soonest is how long until the next Ready pod becomes available.
func availability(g *workload.Group, minReady time.Duration, now time.Time) (available int32, soonest time.Duration) {
	for _, p := range g.Pods {
		if p.Available(minReady, now) {
			available++
		} else if p.Serving() {
			if w := p.ReadySince.Add(minReady).Sub(now); soonest == 0 || w < soonest {
				soonest = w
			}
		}
	}
	return available, soonest
}

// pendingRecords counts admitted evictions whose pods the cache still shows available:
// the window before informers see the eviction. They lapse after budget.EvictionLapse (and the
// clock margin of the replica that wrote them).
func pendingRecords(in Input, minReady time.Duration) int32 {
	var n int32
	for _, r := range in.Records {
		// A retried eviction of this very pod is the same disruption, not another one.
		if in.Now.Sub(r.At) >= budget.EvictionLapse+in.margin(r) || r.UID == in.Pod.UID {
			continue
		}
		for _, p := range in.Group.Pods {
			if p.UID == r.UID && p.Available(minReady, in.Now) {
				n++
			}
		}
	}
	return n
}

// lastEffective is when, at the latest on this replica's clock, the newest admitted
// eviction of another of the group's pods took effect or may still (budget.LastEffective).
func lastEffective(in Input) (time.Time, bool) {
	return budget.LastEffective(in.Records, in.Now, in.margin, in.Group.Running, in.Pod.UID)
}

// windowHold defers the eviction while the policy's windows hold changes (an open Deny
// window, or none of its Allow windows open), until they stop.
func windowHold(in Input, spec *v1alpha1.DisruptionPolicySpec) (decision.Violation, bool) {
	if len(spec.Windows) == 0 {
		return decision.Violation{}, false
	}
	// A window that cannot be evaluated is ignored (policy.ParseWindows), never a hold
	// on every eviction: the policy's status is Ready=False and alerts.
	ws, _ := policy.ParseWindows(spec.Windows)
	h := ws.At(in.Now)
	if !h.Held {
		return decision.Violation{}, false
	}
	wait := h.Until.Sub(in.Now)
	return decision.Violation{Rule: RuleWindow, Wait: wait, Message: fmt.Sprintf(
		"evictions of %s are held by the window %q until %s (in %s)",
		in.Group.Ref, h.Window, h.Until.UTC().Format(time.RFC3339), wait.Round(time.Second))}, true
}

// exempted is the record of an eviction a temporary exemption let through.
func exempted(policyName string, grant *v1alpha1.TemporaryExemption, found []decision.Violation) decision.Violation {
	refused := make([]string, 0, len(found))
	for _, v := range found {
		refused = append(refused, v.Rule+": "+v.Message)
	}
	return decision.Exempted(policyName, grant, refused)
}

// heldBy is how long the policy has held the pod: its own hold, or holdfast's own
// deferrals (made for every policy that applies) when they began first.
func (in Input) heldBy(policy string) time.Duration {
	return max(in.Held[policy], in.Held[selfHold])
}

// releases is a policy whose holds on the pod have lasted its maxHold and let go after it
// (afterMaxHold Release).
func releases(in Input, name string, spec *v1alpha1.DisruptionPolicySpec) bool {
	return spec.AfterMaxHold == v1alpha1.AfterMaxHoldRelease && spec.MaxHold != nil && in.heldBy(name) >= spec.MaxHold.Duration
}

// released is the record of an eviction let go after maxHold: what the policy's own holds
// said, as an Audit finding, so that it is counted (holdfast_eviction_findings_total
// outcome="released") and shows in the audit log, never silently admitted.
func released(p *v1alpha1.DisruptionPolicy, held time.Duration, found []decision.Violation) decision.Violation {
	refused := make([]string, 0, len(found))
	for _, v := range found {
		refused = append(refused, v.Rule+": "+v.Message)
	}
	return decision.Violation{Policy: p.Name, Rule: RuleMaxHold, Action: decision.Audit, Message: fmt.Sprintf(
		"released after a hold of %s, past maxHold %s (afterMaxHold Release); within the budget as its PodDisruptionBudget counts it, it would have waited for: %s",
		held.Round(time.Second), p.Spec.MaxHold.Duration, strings.Join(refused, "; "))}
}
