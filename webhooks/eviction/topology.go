package eviction

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// RuleTopologyBudget defers the eviction of a Ready pod in a topology domain while as
// many other domains as the policy's topologyBudget allows have disrupted pods of the group.
const RuleTopologyBudget = "topologyBudget"

// topologyHold defers the eviction (or guarded delete) of a serving pod whose domain is
// not among the group's disrupted ones while maxDisruptedDomains domains are (budget.Disrupted
// says what disrupted is). A pod in no domain (its node lacks the key, or has it empty) is
// not limited; nor is a pod that serves nothing, whose eviction takes nothing down. The
// wait named is the bound: the time the first disrupted domain frees at the latest.
func topologyHold(in Input, spec *v1alpha1.DisruptionPolicySpec) (decision.Violation, bool) {
	tb := spec.TopologyBudget
	if tb == nil || in.Group == nil || !in.Pod.Ready {
		return decision.Violation{}, false
	}
	key, limit, bound := tb.Resolved()
	mine, ok := in.Domains[key]
	if !ok {
		return decision.Violation{}, false
	}
	settle := time.Duration(spec.MinReadySeconds) * time.Second
	if settle > 0 {
		settle += budget.MaxClockSkew
	}
	// A retried eviction of this very pod is the same disruption, not another one.
	others := slices.DeleteFunc(slices.Clone(in.Records), func(r budget.Eviction) bool { return r.UID == in.Pod.UID })
	view := DisruptionView(in.Group.Pods, settle, in.Now, key, in.NodeDomains)
	disrupted := budget.Disrupted(others, view, in.Group.Expected, key, bound, in.Now, in.Identity)
	if _, same := disrupted[mine]; same || len(disrupted) < limit {
		return decision.Violation{}, false
	}
	names := slices.Sorted(maps.Keys(disrupted))
	first := names[0]
	parts := make([]string, 0, len(names))
	for _, d := range names {
		if disrupted[d].Before(disrupted[first]) {
			first = d
		}
		parts = append(parts, fmt.Sprintf("%s (frees by %s at the latest)", d, disrupted[d].UTC().Format(time.RFC3339)))
	}
	wait := disrupted[first].Sub(in.Now)
	return decision.Violation{Rule: RuleTopologyBudget, Wait: wait, Message: fmt.Sprintf(
		"%s has pods taken down and not yet replaced in %d %s domain(s): %s, and allows %d at once (topologyBudget); "+
			"pod %s in %s waits until the replacements there are available, or %s after each was admitted (replacementTimeout)",
		in.Group.Ref, len(names), key, strings.Join(parts, ", "), limit, in.Pod.Name, mine, bound)}, true
}

// topologyKeys are the topologyBudget keys of the policies that may apply to a request.
func topologyKeys(policies []v1alpha1.DisruptionPolicy) []string {
	var keys []string
	for i := range policies {
		if tb := policies[i].Spec.TopologyBudget; tb != nil && !policies[i].Spec.Suspend {
			if key, _, _ := tb.Resolved(); !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// readDomains fills in.Domains with the values of the policies' topology keys of in.Pod's
// node, from the node cache; a node missing there (one that joined a moment ago) is read
// from the API server within ctx's bound. A node that does not exist, or a pod not yet
// bound, is in no domain. An error is returned: a decision is not made on a domain it
// could not read.
func (h *Handler) readDomains(ctx context.Context, in *Input) error {
	keys := topologyKeys(in.Policies)
	if len(keys) == 0 || in.Pod.Node == "" || in.Group == nil {
		return nil
	}
	node := &corev1.Node{}
	err := informer.Get(ctx, h.Reader, client.ObjectKey{Name: in.Pod.Node}, node)
	if apierrors.IsNotFound(err) && h.APIReader != nil {
		lctx, cancel := h.Ledgers.Bound(ctx)
		defer cancel()
		err = h.APIReader.Get(lctx, client.ObjectKey{Name: in.Pod.Node}, node)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s for its topology: %w", in.Pod.Node, err)
	}
	for _, k := range keys {
		// An empty value is no domain, as a missing label is (budget.Pod.Domain): the
		// rollout side's shared budget reads it so too.
		if v := node.Labels[k]; v != "" {
			if in.Domains == nil {
				in.Domains = map[string]string{}
			}
			in.Domains[k] = v
		}
	}
	return nil
}

// recordedDomains is what the record of the pod's admitted eviction keeps of its domains
// (budget.Eviction.Domains): its domain of every topology key of the policies, "" where it
// is in none, so that a key read and found empty is told from a key not read (a policy's
// key changed, or its budget added, after the record: budget.NotRecorded). Nil without
// topology keys.
func recordedDomains(in Input) map[string]string {
	keys := topologyKeys(in.Policies)
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = in.Domains[k]
	}
	return out
}

// DisruptionView is the group's pods as budget.Disrupted reads them, at now, with pods
// available once Ready for settle, each in its node's domain of key (nodes' values by
// node name, then key).
func DisruptionView(pods []workload.Pod, settle time.Duration, now time.Time, key string, nodes map[string]map[string]string) []budget.Pod {
	out := make([]budget.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, budget.Pod{UID: p.UID, Created: p.Created, Available: p.Available(settle, now), Domain: nodes[p.Node][key],
			Running: !p.Terminating && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed})
	}
	return out
}

// Serving is what the record of the pod's admitted eviction keeps of its domains
// (budget.Eviction.Serving): by key, how many of the group's pods serve in the pod's
// domain now, the pod included. Nil when the pod is in no domain, or when a serving pod's
// node is not in the cache: a count that missed it would free the domain before its
// replacement, so the record is kept as the previous release wrote it (freed by a later
// replacement in the same domain).
func Serving(in Input) map[string]int32 {
	if len(in.Domains) == 0 || in.Group == nil {
		return nil
	}
	for _, p := range in.Group.Pods {
		if p.UID != in.Pod.UID && p.Serving() && in.NodeDomains[p.Node] == nil {
			return nil
		}
	}
	out := make(map[string]int32, len(in.Domains))
	for key, mine := range in.Domains {
		n := int32(1) // the pod itself, Ready, or its eviction would not be recorded
		for _, p := range in.Group.Pods {
			if p.UID != in.Pod.UID && p.Serving() && in.NodeDomains[p.Node][key] == mine {
				n++
			}
		}
		out[key] = n
	}
	return out
}

// readNodeDomains fills in.NodeDomains with the topology keys' values of the nodes the
// group's pods run on, from the node cache: a node missing there (one that joined a moment
// ago) is in no domain (a nil entry), so its pods make no domain whole, which errs toward
// holding, and no count is recorded beside it (Serving).
func (h *Handler) readNodeDomains(ctx context.Context, in *Input) error {
	keys := topologyKeys(in.Policies)
	if len(keys) == 0 || in.Group == nil || len(in.Domains) == 0 {
		return nil
	}
	in.NodeDomains = make(map[string]map[string]string, len(in.Group.Pods))
	for _, p := range in.Group.Pods {
		if _, seen := in.NodeDomains[p.Node]; seen || p.Node == "" {
			continue
		}
		node := &corev1.Node{}
		if err := informer.Get(ctx, h.Reader, client.ObjectKey{Name: p.Node}, node); apierrors.IsNotFound(err) {
			in.NodeDomains[p.Node] = nil
			continue
		} else if err != nil {
			return fmt.Errorf("reading node %s for its topology: %w", p.Node, err)
		}
		values := map[string]string{}
		for _, k := range keys {
			if v := node.Labels[k]; v != "" {
				values[k] = v
			}
		}
		in.NodeDomains[p.Node] = values
	}
	return nil
}
