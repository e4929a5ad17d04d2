package eviction

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// HoldBreak is how long after a pod's last deferred eviction a new one starts a new hold:
// drain tools retry every few seconds, so a minute without one means the drain stopped.
const HoldBreak = time.Minute

// Holds tracks, per pod, since when this replica has deferred its evictions without a
// break, and since when each policy has (maxHold). Each replica sees the retries it
// answers; a drain whose retries are spread over replicas is warned about by each once its
// own view passes maxHold. A policy's maxHold counts its own hold, not the pod's: one
// policy's long hold (a freeze window) must not release another's that began a moment ago.
type Holds struct {
	mu   sync.Mutex
	pods map[types.UID]hold
}

// hold is a pod's: span since its first deferral; by, each deferring policy's own.
type hold struct {
	span
	by map[string]span
}

type span struct{ since, last time.Time }

// extend is the span with a deferral at now, a new one after a break.
func (s span) extend(now time.Time) span {
	if s.since.IsZero() || now.Sub(s.last) > HoldBreak {
		s.since = now
	}
	s.last = now
	return s
}

// Deferred records a deferral of the pod's eviction at now by the policies named, and
// returns how long the pod has been held and how long each policy has held it.
func (h *Holds) Deferred(pod types.UID, policies []string, now time.Time) (time.Duration, map[string]time.Duration) {
	if h == nil {
		return 0, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pods == nil {
		h.pods = map[types.UID]hold{}
	}
	for uid, p := range h.pods {
		if now.Sub(p.last) > HoldBreak {
			delete(h.pods, uid)
		}
	}
	p := h.pods[pod]
	p.span = p.span.extend(now)
	if p.by == nil {
		p.by = map[string]span{}
	}
	// holdfast's own deferrals (a ledger it could not read or write in time) are made for
	// every policy that applies: they keep each policy's hold going, and a policy that
	// defers next holds since the first of them.
	own, ownLive := p.by[selfHold]
	ownLive = ownLive && now.Sub(own.last) <= HoldBreak
	for _, name := range policies {
		s, live := p.by[name]
		live = live && now.Sub(s.last) <= HoldBreak
		s = s.extend(now)
		if !live && ownLive && name != selfHold {
			s.since = own.since
		}
		p.by[name] = s
		if name == selfHold {
			for other, o := range p.by {
				if now.Sub(o.last) <= HoldBreak {
					o.last = now
					p.by[other] = o
				}
			}
		}
	}
	h.pods[pod] = p
	return now.Sub(p.since), p.held(now)
}

// held is how long each policy has held the pod as of now: those whose last deferral is
// more than HoldBreak old hold it no longer.
func (p hold) held(now time.Time) map[string]time.Duration {
	out := make(map[string]time.Duration, len(p.by))
	for name, s := range p.by {
		if now.Sub(s.last) <= HoldBreak {
			out[name] = max(now.Sub(s.since), 0)
		}
	}
	return out
}

// Held is how long each policy has held the pod as of now, without recording a deferral:
// nil when this replica holds none (or the last deferral is more than HoldBreak old).
func (h *Holds) Held(pod types.UID, now time.Time) map[string]time.Duration {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pods[pod]
	if !ok || now.Sub(p.last) > HoldBreak {
		return nil
	}
	return p.held(now)
}

// Longest is, per policy, the longest hold on any pod as of now that the policy's own
// deferrals keep going (a last deferral more than HoldBreak old holds no longer), for
// holdfast_eviction_longest_hold_seconds. holdfast's own deferrals (selfHold) are left
// out: they keep the holds of the policies that applied going.
func (h *Holds) Longest(now time.Time) map[string]time.Duration {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]time.Duration{}
	for _, p := range h.pods {
		for name, held := range p.held(now) {
			if name != selfHold && held >= out[name] {
				out[name] = held
			}
		}
	}
	return out
}

// Ended forgets the pod's hold (its eviction was admitted) and returns how long it lasted.
func (h *Holds) Ended(pod types.UID, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pods[pod]
	delete(h.pods, pod)
	return now.Sub(p.since), ok
}

// deferring names the policies whose holds go on while the eviction is deferred: those
// whose violations defer it, and those that let go of it after their maxHold (RuleMaxHold)
// while another policy still defers it, so that a released policy's hold does not lapse
// and start again from zero when the other lets go.
func deferring(d Decision) []string {
	if d.Retry {
		return []string{selfHold}
	}
	var names []string
	for _, v := range d.Violations {
		if (v.Action == decision.Deny || v.Rule == RuleMaxHold) && !slices.Contains(names, v.Policy) {
			names = append(names, v.Policy)
		}
	}
	return names
}

// maxHold is the deferring policy whose own hold has lasted longest past its maxHold, with
// that maxHold and hold; false when none has lasted past it.
func maxHold(d Decision, policies []v1alpha1.DisruptionPolicy, held map[string]time.Duration) (string, time.Duration, time.Duration, bool) {
	var name string
	var limit, longest time.Duration
	for i := range policies {
		p := &policies[i]
		if p.Spec.MaxHold == nil || !deferredBy(d, p.Name) {
			continue
		}
		if h := held[p.Name]; h > p.Spec.MaxHold.Duration && h-p.Spec.MaxHold.Duration > longest-limit {
			name, limit, longest = p.Name, p.Spec.MaxHold.Duration, h
		}
	}
	return name, limit, longest, name != ""
}

// nodeOf is the node an Event about a held pod is also recorded on.
func nodeOf(pod *corev1.Pod) *corev1.Node {
	if pod.Spec.NodeName == "" {
		return nil
	}
	return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName, UID: types.UID(pod.Spec.NodeName)}}
}

// KarpenterDeadlineAnnotation is where Karpenter keeps, on a NodeClaim, the time its
// termination grace period ends (sigs.k8s.io/karpenter pkg/apis/v1,
// NodeClaimTerminationTimestampAnnotationKey, RFC 3339): its node termination controller
// (pkg/controllers/node/termination, nodeTerminationTime) deletes each pod at that time
// less the pod's terminationGracePeriodSeconds, whatever PDB or webhook holds it.
const KarpenterDeadlineAnnotation = "karpenter.sh/nodeclaim-termination-timestamp"

// nodeClaimGVK is Karpenter's NodeClaim, read unstructured: holdfast does not depend on
// Karpenter's module, and a cluster without it has no such kind.
var nodeClaimGVK = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaimList"}

// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=list

// nodeClaimDeadline is when Karpenter deletes the pod whatever holds it: its node's
// NodeClaim's termination timestamp less the pod's grace period. False when Karpenter does
// not run, the node has no NodeClaim, or the NodeClaim has no deadline yet. Read only for a
// deferral of a requester whose entry asks for it (deadline.nodeClaim).
func (h *Handler) nodeClaimDeadline(ctx context.Context, pod *corev1.Pod) (time.Time, bool) {
	if pod.Spec.NodeName == "" || h.APIReader == nil {
		return time.Time{}, false
	}
	at, ok, err := nodeClaimDeadline(ctx, h.APIReader, pod.Spec.NodeName)
	if err != nil || !ok {
		return time.Time{}, false // no Karpenter, or not readable now: no deadline to warn of
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return at.Add(-time.Duration(grace) * time.Second), true
}

// nodeClaimDeadline reads the termination timestamp of the NodeClaim whose status names
// the node (Karpenter's NodeClaims are not named after their nodes).
func nodeClaimDeadline(ctx context.Context, r client.Reader, node string) (time.Time, bool, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(nodeClaimGVK)
	if err := r.List(ctx, &list); err != nil {
		return time.Time{}, false, err
	}
	for _, nc := range list.Items {
		if name, _, _ := unstructured.NestedString(nc.Object, "status", "nodeName"); name != node {
			continue
		}
		v, ok := nc.GetAnnotations()[KarpenterDeadlineAnnotation]
		if !ok {
			return time.Time{}, false, nil
		}
		at, err := time.Parse(time.RFC3339, v)
		return at, err == nil, nil
	}
	return time.Time{}, false, nil
}

// outlasts is the warning that a deferred eviction's hold would outlast the drain deadline
// of the requester entry that names the evicting user, in a policy that deferred it: the
// time the drainer forces the pod out (or gives up) and the time the budget frees, as far
// as holdfast can tell. held is how long the pod has been held, this deferral included;
// nodeClaim reads Karpenter's deadline, only when an entry asks for it. False when no entry
// has a deadline, or the hold ends before it.
func outlasts(pod *corev1.Pod, d Decision, in Input, held time.Duration, nodeClaim func() (time.Time, bool)) (string, bool) {
	since := in.Now.Add(-held)
	var deadline time.Time
	var then v1alpha1.DrainerAction
	var who string
	for i := range in.Policies {
		p := &in.Policies[i]
		if !deferredBy(d, p.Name) {
			continue
		}
		r := policy.RequesterFor(p.Spec.Requesters, in.User)
		if r == nil || r.Deadline == nil {
			continue
		}
		at, ok := time.Time{}, false
		if r.Deadline.After != nil {
			at, ok = since.Add(r.Deadline.After.Duration), true
		}
		if r.Deadline.NodeClaim && nodeClaim != nil {
			if k, found := nodeClaim(); found && (!ok || k.Before(at)) {
				at, ok = k, true
			}
		}
		if ok && (deadline.IsZero() || at.Before(deadline)) {
			deadline, then, who = at, r.Deadline.Then, p.Name
		}
	}
	if deadline.IsZero() {
		return "", false
	}
	frees, known := in.Now.Add(d.Wait()), d.Wait() > 0
	if at, ok := releasedAt(d, in.Policies, since); ok && (!known || at.Before(frees)) {
		frees, known = at, true
	}
	if known && !frees.After(deadline) {
		return "", false
	}
	what := "forces the pod out (deletes it without an eviction)"
	if then == v1alpha1.DrainerGiveUp {
		what = "gives up the drain"
	}
	when := "holdfast cannot tell when the budget frees (it waits for a replacement to be Ready)"
	if known {
		when = "the budget frees at " + frees.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("the eviction of pod %s/%s by %s, deferred for %s, would outlast its drain deadline (policy %s's requester entry): "+
		"the drainer %s at %s, and %s: %s",
		pod.Namespace, pod.Name, in.User.Username, held.Round(time.Second), who, what, deadline.UTC().Format(time.RFC3339), when, d.Denial()), true
}

// deferredBy is whether the policy's violations defer the eviction.
func deferredBy(d Decision, name string) bool {
	for _, v := range d.Violations {
		if v.Policy == name && v.Action == decision.Deny {
			return true
		}
	}
	return false
}

// releasedAt is when every policy that defers the eviction lets its own holds go
// (afterMaxHold Release): the latest of their maxHolds after the hold began. False when
// one of them keeps holding.
func releasedAt(d Decision, policies []v1alpha1.DisruptionPolicy, since time.Time) (time.Time, bool) {
	var at time.Time
	for i := range policies {
		p := &policies[i]
		if !deferredBy(d, p.Name) {
			continue
		}
		if p.Spec.AfterMaxHold != v1alpha1.AfterMaxHoldRelease || p.Spec.MaxHold == nil {
			return time.Time{}, false
		}
		if t := since.Add(p.Spec.MaxHold.Duration); t.After(at) {
			at = t
		}
	}
	return at, !at.IsZero()
}
