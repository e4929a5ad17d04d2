package eviction

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/apijson"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Path is where the eviction webhook is served.
const Path = interception.EvictionPath

// DeletePath is where the same handler is served for pod DELETEs (DisruptionPolicy
// guardDeletes): one decision and one ledger for both ways down, and the API server's and
// controller-runtime's per-path metrics tell the two apart.
const DeletePath = interception.DeletePath

// CauseType marks holdfast's refusals ("never") of evictions; deferrals carry kube's
// DisruptionBudget cause so that drains retry them, with a message that names holdfast.
const CauseType metav1.CauseType = "holdfast.dev/DisruptionPolicy"

// ledgerAttempts bounds the optimistic-concurrency retries on the group's ledger.
const ledgerAttempts = 5

// Handler decides evictions of the pods DisruptionPolicies select, and the DELETEs of those
// whose policies guard deletes.
type Handler struct {
	// Reader reads policies, namespaces, pods and their owners from informer caches.
	Reader client.Reader
	// APIReader reads from the API server what the cache may not have seen yet: a pod
	// created or become Ready a moment ago.
	APIReader client.Reader
	// Ledgers are the groups' ledgers of admitted evictions, which the rollout guard
	// writes too.
	Ledgers *budget.Ledgers
	Clock   clock.PassiveClock
	// Events records a deferral or refusal on the pod, at most once per pod and minute
	// (drains retry every 5 s); nil records nothing.
	Events *events.Limiter
	// Matcher evaluates the policies' targets, keeping their compiled selectors; nil
	// compiles them on every request.
	Matcher *policy.Matcher
	// Metrics counts decisions; nil counts nothing.
	Metrics *Metrics
	// Holds tracks how long pods' evictions have been deferred (maxHold); nil tracks none.
	Holds *Holds
	// Journals are the revision journals, for the rollouts that share a budget
	// (RolloutPolicy rules.sharedBudget); nil reads none.
	Journals *journal.Store
	// Replacements judge an eviction or DELETE whose pod kube replaces from a template no
	// pod runs yet as the start of that template's rollout; nil judges none.
	Replacements Replacements

	// decide is Decide, unless a test substitutes a broken decision to show that the model
	// explorer finds what it breaks.
	decide func(Input) Decision
}

var _ admission.Handler = &Handler{}

// +kubebuilder:rbac:groups=holdfast.dev,resources=disruptionpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets;daemonsets,verbs=get;list;watch

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := h.Clock.Now()
	if req.Operation == admissionv1.Delete {
		return h.handle(ctx, req, start, nil)
	}
	ev, err := h.decode(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	return h.handle(ctx, req, start, ev)
}

// handle decides an eviction (ev) or, when ev is nil, a DELETE of the pod.
func (h *Handler) handle(ctx context.Context, req admission.Request, start time.Time, ev *policyv1.Eviction) admission.Response {
	deleting := ev == nil
	var deleted *corev1.Pod
	if deleting {
		var err error
		if deleted, err = decodeDelete(req); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	dryRun := (req.DryRun != nil && *req.DryRun) || (ev != nil && ev.DeleteOptions != nil && slices.Contains(ev.DeleteOptions.DryRun, metav1.DryRunAll))
	kind := "eviction"
	if deleting {
		kind = "delete"
	}

	// What the request reads and writes of the API server shares one deadline from its
	// arrival: bounds per read would add up past the webhook's timeout, where the request
	// fails open under failurePolicy Ignore.
	deadline := h.Ledgers.Deadline()
	// An eviction reads the policies and the pod from the cache into one allocation; a
	// DELETE carries the pod as the API server holds it.
	var policies *v1alpha1.DisruptionPolicyList
	pod := deleted
	if deleting {
		policies = &v1alpha1.DisruptionPolicyList{}
	} else {
		read := &struct {
			policies v1alpha1.DisruptionPolicyList
			pod      corev1.Pod
		}{}
		policies, pod = &read.policies, &read.pod
	}
	if err := informer.List(ctx, h.Reader, policies); err != nil {
		return h.fail(fmt.Errorf("listing DisruptionPolicies: %w", err))
	}
	if len(policies.Items) == 0 && h.Replacements == nil {
		return admission.Allowed("")
	}
	// Objects missing from this replica's cache may be new ones it has not seen yet:
	// confirm with the API server before treating them as gone.
	reader := fallbackReader{cached: h.Reader, live: h.APIReader, deadline: deadline}
	if !deleting {
		if err := informer.Get(ctx, reader, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
			if apierrors.IsNotFound(err) {
				return admission.Allowed("") // the API server answers 404 itself
			}
			if slowAPIServer(err) { // a pod this replica has not seen yet, read live
				return h.notNowEarly(err, Input{}, start, nil)
			}
			return h.fail(err)
		}
	}
	nsLabels, err := policy.NamespaceLabels(ctx, h.Reader, req.Namespace)
	if err != nil {
		return h.fail(err)
	}
	if h.namespaceMayLag(policies.Items, pod.Namespace, nsLabels, pod.Labels) {
		// Best effort: when the API server does not answer in time, the cache's labels
		// decide, as they did before it was asked.
		if live, err := h.liveNamespaceLabels(ctx, deadline, req.Namespace); err == nil {
			nsLabels = live
		} else {
			logf.FromContext(ctx).V(1).Info("Reading the namespace's labels from the API server failed; judging on the cache's", "namespace", req.Namespace, "error", err.Error())
		}
	}
	in := Input{Pod: workload.PodOf(pod), PodLabels: pod.Labels, NamespaceLabels: nsLabels,
		Policies: policies.Items, Matcher: h.Matcher, User: req.UserInfo, Identity: h.Ledgers.Self(), Now: start, Delete: deleting}
	// A pod whose replacement would be the first of a staged template: the rollout guard
	// judges that start (from its caches; it records nothing).
	held, holds, replacementFindings, err := h.replacement(ctx, deadline, pod, nsLabels, req.UserInfo)
	if err != nil {
		err = fmt.Errorf("judging the replacement of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		if !slowAPIServer(err) {
			return h.fail(err)
		}
		// The workload is read from the API server: slow, it is "not now".
		return h.notNowEarly(err, in, start, deleted)
	}
	replaced := func(resp admission.Response) admission.Response {
		if len(replacementFindings) > 0 && resp.Allowed {
			resp.Warnings = append(resp.Warnings, decision.Allowed(replacementFindings).Warnings...)
		}
		return resp
	}
	if !deleting && !holds && !selectsAny(in) && h.labelsMayLag(ctx, &in, pod) {
		// Best effort, as a namespace's read: when the API server does not answer, the
		// cache's labels decide, as they did before it was asked.
		live := &corev1.Pod{}
		lctx, cancel := deadline.Bound(ctx)
		err := h.APIReader.Get(lctx, client.ObjectKeyFromObject(pod), live)
		cancel()
		if err == nil {
			h.livePod(&in, workload.PodOf(live))
			in.PodLabels, pod = live.Labels, live
		} else {
			logf.FromContext(ctx).V(1).Info("Reading the pod from the API server failed; judging on the cache's labels", "pod", klog.KObj(pod), "error", err.Error())
		}
	}
	if !holds && !selectsAny(in) {
		return replaced(admission.Allowed("")) // the fast path: no policy selects the pod
	}
	if deleting {
		// What the entry's matchConditions cannot see: the pod's node.
		if in.NodeLost, err = nodeLost(ctx, h.Reader, pod); err != nil {
			return h.fail(err)
		}
	}
	// finish records and answers the final decision; ledger conflicts retried before it are not counted.
	finish := func(d Decision) admission.Response {
		if d.Retry && len(d.Applied.Names()) == 0 {
			// holdfast's own deferral holds the drain under every policy that applies: it
			// counts under each (holdfast_eviction_reviews_total), so that a policy whose
			// drain is stuck on a contended or slow ledger alerts as one held by a rule.
			d.Applied = decideWith(h.decide, in).Applied
		}
		h.Metrics.observe(d, in, h.Clock.Since(start))
		if len(d.Violations) > 0 {
			logf.FromContext(ctx).Info("Eviction policy violated", "pod", klog.KObj(pod), "request", kind, "action", d.Action().String(), "dryRun", dryRun,
				"violations", d.Messages(decision.Audit))
		}
		reason := "Eviction"
		if deleting {
			reason = "Delete"
		}
		switch a := d.Action(); {
		case dryRun:
		case a == decision.Deny && d.Never():
			h.Events.Warn(pod, kind, in.Now, reason+"Refused", d.Denial())
		case a == decision.Deny:
			h.Events.Warn(pod, kind, in.Now, reason+"Deferred", d.Denial())
			if !deleting {
				h.heldTooLong(ctx, pod, d, in)
			}
		case d.Released:
			// Let go after maxHold: seen where the hold was warned of, on the pod and its node.
			note := strings.Join(d.Messages(decision.Audit), "; ")
			h.warnPodAndNode(pod, "released", in.Now, "EvictionReleased", note)
		case a == decision.Warn:
			h.Events.Warn(pod, kind, in.Now, reason+"Warning", strings.Join(d.Messages(decision.Warn), "; "))
		case a == decision.Audit:
			h.Events.Normal(pod, kind, in.Now, reason+"Audit", strings.Join(d.Messages(decision.Audit), "; "))
		}
		if a := d.Action(); a != decision.Deny && !dryRun && !deleting && !d.Released {
			if held, ok := h.Holds.Ended(in.Pod.UID, in.Now); ok {
				h.Metrics.held(held)
			}
		}
		// A released eviction keeps its hold: kube's PodDisruptionBudget, checked after the
		// webhook on a status that lags the pods, may still refuse it, and the drain's retry
		// is released again rather than held from zero for another maxHold. The hold lapses
		// HoldBreak after the pod is gone.
		if deleting {
			return replaced(respondDelete(d, pod))
		}
		return replaced(respond(d))
	}
	// The rest reads the API server (the workload when the cache lacks it, the group's
	// ledger) within the request's bound, inside the webhook's timeout: past it the answer
	// is "not now", never the API server giving up on holdfast, which fails open.
	ctx, cancel := deadline.Bound(ctx)
	defer cancel()
	serving := !deleting || holds || (in.Pod.Ready && !in.NodeLost)
	// The workload is read from the API server when the cache lacks it (an orphan's
	// adopter): a slow API server there is "not now" as well. A DELETE that is never held
	// (below) does not wait for it.
	if in.Group, err = workload.GroupOf(ctx, reader, h.APIReader, pod); err != nil && serving {
		return h.notNow(finish, fmt.Errorf("reading the owner of pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	if !serving {
		return finish(decideWith(h.decide, in)) // never held, never recorded
	}
	if err := h.readSharedRollout(ctx, &in); err != nil {
		return h.fail(err)
	}
	if holds {
		return finish(held)
	}
	notReady := (!in.Pod.Ready || in.Pod.Terminating) && in.Group != nil
	if notReady && h.APIReader != nil {
		// A pod that is not Ready, or already going, may be evicted without waiting or being
		// recorded (E3): make sure the pod of the name has not just become Ready, or been
		// replaced by one that is, where this replica's cache cannot see it yet.
		live := &corev1.Pod{}
		if err := h.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), live); err == nil {
			h.livePod(&in, workload.PodOf(live))
			in.PodLabels, pod = live.Labels, live
		} else if !apierrors.IsNotFound(err) {
			return h.notNow(finish, err)
		}
	}
	// A domain not read is "not now" (a slow API server) or holdfast's fault, never an allow.
	if err := h.readDomains(ctx, &in); err != nil {
		return h.notNow(finish, err)
	}
	if err := h.readNodeDomains(ctx, &in); err != nil {
		return h.notNow(finish, err)
	}
	if deleting {
		// kube checks no PodDisruptionBudget on a DELETE: two floors do not matter.
	} else if both, err := twoFloors(ctx, h.Reader, h.APIReader, pod, start); err != nil {
		return h.fail(err)
	} else if both != "" {
		return finish(retryLater(fmt.Sprintf("PodDisruptionBudgets %s both cover pod %s/%s, so kube would answer 500 to its eviction; "+
			"holdfast's generated one steps back within seconds", both, pod.Namespace, pod.Name)))
	}
	if notReady {
		// Nor need it wait for the ledger, which a decision about it may not read.
		if !deleting {
			in.Held = h.Holds.Held(in.Pod.UID, in.Now)
		}
		d, err := h.confirmLive(ctx, &in, decideWith(h.decide, in))
		pod = asDecided(pod, in.Pod)
		if err != nil {
			return finish(retryLater(err.Error()))
		}
		// An exempt requester's eviction of a pod found Ready uses no record, but is
		// recorded (E1): it goes on to the ledger too.
		if !d.UsesRecords && !d.Counts {
			return finish(d)
		}
	}
	keep := budget.Retention(in.Policies)
	for range ledgerAttempts {
		var g budget.Group
		if in.Group != nil {
			if g, err = h.Ledgers.ReadGroup(ctx, budget.GroupID(in.Group.Ref)); err != nil {
				return h.notNow(finish, fmt.Errorf("the eviction ledger of %s: %w", in.Group.Ref, err))
			}
			in.Records = g.Records
			if s, ok := g.RolloutStart(); ok {
				h.sharedStart(&in, s)
			}
		}
		in.Now = h.Clock.Now()
		if !deleting {
			// maxHold counts the evictions this replica deferred; a delete is never released.
			in.Held = h.Holds.Held(in.Pod.UID, in.Now)
		}
		d, err := h.confirmLive(ctx, &in, decideWith(h.decide, in))
		pod = asDecided(pod, in.Pod)
		if err != nil {
			return finish(retryLater(err.Error()))
		}
		// Only an eviction that takes a Ready pod down is recorded (E3), and only once.
		if d.Action() == decision.Deny || dryRun || !d.Counts || g.Ledger == nil || in.Recorded() {
			return finish(d)
		}
		rec := budget.Eviction{Pod: pod.Name, UID: in.Pod.UID, At: in.Now, By: h.Ledgers.Self(), Released: d.Released}
		if deleting {
			rec.Via = budget.ViaDelete
		}
		rec.Domains, rec.Serving = recordedDomains(in), Serving(in)
		err = g.RecordEviction(ctx, h.Ledgers, rec, keep)
		switch {
		case err == nil:
			return finish(d)
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
			// Another replica admitted an eviction in this group meanwhile, or the sweeper
			// deleted the ledger since it was read: decide again on a fresh read.
		default:
			return h.notNow(finish, fmt.Errorf("recording the eviction: %w", err))
		}
	}
	return finish(retryLater("the group's eviction ledger is contended"))
}

// confirmLive decides again on the group's pods read from the API server, once per
// request, when the decision on the cache's lets a Ready pod go that a policy guards, or
// that an exempt requester's eviction takes down (recorded as any other, E1): a cache
// that lags shows a pod replaced moments ago still Ready, or a replacement not Ready yet as
// absent, and the budget is counted, and the eviction recorded, on the pods as they are.
// A refusal needs no second read (the drain retries), so a drain held by its budget costs
// no API call, nor does a pod that serves nothing; an admitted eviction costs one List of
// the workload's pods (two for a Deployment's), within the request's bound. A failed read
// is "not now" (429: the drain retries), never the cache's answer. Without an API reader
// the cache decides.
func (h *Handler) confirmLive(ctx context.Context, in *Input, d Decision) (Decision, error) {
	if d.Action() == decision.Deny || !d.Counts || in.Group == nil || in.GroupLive || h.APIReader == nil {
		return d, nil
	}
	failed := func(err error) (Decision, error) {
		h.Metrics.groupRead(Decision{}, err)
		return Decision{}, err
	}
	g := *in.Group
	if err := g.ReadLive(ctx, h.APIReader); err != nil {
		return failed(fmt.Errorf("reading the pods of %s: %w", g.Ref, err))
	}
	in.Group, in.GroupLive = &g, true
	node := in.Pod.Node
	for _, p := range g.Pods {
		if p.Name == in.Pod.Name && p.UID != in.Pod.UID {
			h.livePod(in, p)
		}
	}
	// The policies that select it are matched on its labels as the API server has them:
	// the pod of the name re-created from a template whose labels changed, or relabelled,
	// may be selected by others than the cached one was.
	if labels, ok := g.LiveLabels(in.Pod.Name); ok {
		in.PodLabels = labels
	}
	// The pod of the name may be a new one on another node, and the pods may run on
	// nodes the cached ones did not: their domains are read again (from the node cache;
	// the evicted pod's node from the API server when the cache lacks it, as before).
	if in.Pod.Node != node {
		in.Domains = nil
		if err := h.readDomains(ctx, in); err != nil {
			return failed(err)
		}
	}
	if err := h.readNodeDomains(ctx, in); err != nil {
		return failed(err)
	}
	counted := d.Counts
	d = decideWith(h.decide, *in)
	if counted && !d.Counts && d.Action() != decision.Deny && in.Pod.Ready && !in.Pod.Terminating {
		// The pod of the name, as read, is no policy's (its labels changed), but it is a
		// Ready pod of the group the cache's decision counted: its eviction takes one down
		// for the group's other pods' policies, so it is recorded (E1) for a replica whose
		// cache does not show it go yet.
		d.Counts = true
	}
	h.Metrics.groupRead(d, nil)
	return d, nil
}

// livePod makes p, the pod of in.Pod's name as the API server has it, the one decided:
// kube evicts that one, and a cache that lags may still hold the one it replaced (another
// UID, maybe on another node), whose hold and records are not this one's.
func (h *Handler) livePod(in *Input, p workload.Pod) {
	in.Pod = p
	if !in.Delete {
		in.Held = h.Holds.Held(p.UID, in.Now)
	}
}

// asDecided is the cached pod as the pod decided: when the decision moved to the pod of
// the name as the API server has it (confirmLive), its UID and node, so that the Events
// and node warnings of the answer are about the pod kube evicts, not the one it replaced.
func asDecided(cached *corev1.Pod, decided workload.Pod) *corev1.Pod {
	if cached.UID == decided.UID {
		return cached
	}
	p := cached.DeepCopy()
	p.UID, p.Spec.NodeName, p.CreationTimestamp = decided.UID, decided.Node, metav1.NewTime(decided.Created)
	return p
}

// labelsMayLag reports the eviction of a StatefulSet's pod that no policy selects by the
// labels this replica's cache shows, while a policy selects the labels of the StatefulSet's
// template: the pod of the name may have been re-created from a template whose labels
// changed (or relabelled) a moment ago, and kube evicts that one. Its labels are then read
// from the API server (one GET), before the eviction passes as no policy's.
func (h *Handler) labelsMayLag(ctx context.Context, in *Input, pod *corev1.Pod) bool {
	owner := metav1.GetControllerOfNoCopy(pod)
	if h.APIReader == nil || owner == nil || owner.Kind != string(v1alpha1.KindStatefulSet) {
		return false
	}
	var sts appsv1.StatefulSet
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, &sts); err != nil || sts.UID != owner.UID {
		return false
	}
	t := *in
	t.PodLabels = sts.Spec.Template.Labels
	return selectsAny(t)
}

// overlapGrace is how long after the newest of two PDBs over a pod holdfast defers its
// evictions (twoFloors): the generator steps back within seconds.
const overlapGrace = time.Minute

// twoFloors names the PodDisruptionBudgets when holdfast's generated floor and another both
// cover a pod whose eviction kube checks against PDBs (pkg/registry/core/pod/storage,
// EvictionREST.Create: a pod neither terminal, Pending nor terminating): kube answers 500
// ("more than one PodDisruptionBudget") after admission, and a drain gives up on a 500.
// It happens for the moments between another PDB's creation and the generator stepping
// back; a 429 makes the drain retry past them, for at most overlapGrace after the newest
// PDB was created. Two PDBs of others' (a forged managed-by label included) are kube's to
// answer.
// When the cache shows the floor over the pod, the API server is asked (live): a PDB
// created a moment ago is what this is for, and the cache may not hold it yet.
func twoFloors(ctx context.Context, cached, live client.Reader, pod *corev1.Pod, now time.Time) (string, error) {
	if p := pod.Status.Phase; p == corev1.PodSucceeded || p == corev1.PodFailed || p == corev1.PodPending || pod.DeletionTimestamp != nil {
		return "", nil
	}
	covering := func(r client.Reader) ([]string, bool, error) {
		var pdbs policyv1.PodDisruptionBudgetList
		if err := informer.ListIn(ctx, r, &pdbs, pod.Namespace); err != nil {
			return nil, false, fmt.Errorf("listing the PodDisruptionBudgets of namespace %s: %w", pod.Namespace, err)
		}
		var names []string
		generated, newest := false, time.Time{}
		for i := range pdbs.Items {
			p := &pdbs.Items[i]
			if p.Spec.Selector == nil {
				continue
			}
			if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil && sel.Matches(labels.Set(pod.Labels)) {
				names = append(names, p.Name)
				generated = generated || pdb.Generated(p)
				if t := p.CreationTimestamp.Time; t.After(newest) {
					newest = t
				}
			}
		}
		// Only for the moments the generator takes to step back: a pair of PDBs older
		// than that is no race of holdfast's, and deferring it would hold a drain forever.
		return names, generated && now.Sub(newest) < overlapGrace, nil
	}
	names, generated, err := covering(cached)
	if err != nil || !generated {
		return "", err
	}
	if live != nil {
		if names, generated, err = covering(live); err != nil {
			return "", err
		}
	}
	if len(names) < 2 || !generated {
		return "", nil
	}
	return strings.Join(names, " and "), nil
}

// heldTooLong warns, on the pod and its node, when the pod's evictions have been deferred
// without a break for longer than a deferring policy's maxHold, and before the hold would
// outlast the requester's drain deadline: platforms force a drain after a fixed time, and
// operators should act first. It never changes the answer.
func (h *Handler) heldTooLong(ctx context.Context, pod *corev1.Pod, d Decision, in Input) {
	now := in.Now
	held, by := h.Holds.Deferred(in.Pod.UID, deferring(d), now)
	if note, ok := outlasts(pod, d, in, held, func() (time.Time, bool) { return h.nodeClaimDeadline(ctx, pod) }); ok {
		h.warnPodAndNode(pod, "deadline", now, "EvictionOutlastsDrainer", note)
	}
	name, limit, long, over := maxHold(d, in.Policies, by)
	if !over {
		return
	}
	h.Metrics.heldTooLong(name)
	note := fmt.Sprintf("the eviction of pod %s/%s has been deferred by policy %s for %s, longer than its maxHold of %s: %s",
		pod.Namespace, pod.Name, name, long.Round(time.Second), limit, d.Denial())
	h.warnPodAndNode(pod, "held", now, "EvictionHeldTooLong", note)
}

// warnPodAndNode records a Warning Event about a held pod, and the same on its node, where
// the drain that waits on it is watched. The node's Event relates to the pod, so that
// Events about two of its pods stay apart (events.Limiter.WarnRelated).
func (h *Handler) warnPodAndNode(pod *corev1.Pod, key string, now time.Time, reason, note string) {
	h.Events.Warn(pod, key, now, reason, note)
	if node := nodeOf(pod); node != nil {
		h.Events.WarnRelated(node, pod, key+"/"+string(pod.UID), now, reason, note)
	}
}

// decideWith is decide, or Decide when it is nil.
func decideWith(decide func(Input) Decision, in Input) Decision {
	if decide == nil {
		return Decide(in)
	}
	return decide(in)
}

// SelfPolicy names holdfast's own deferrals, made for whatever policies apply, in their
// messages and metrics.
const SelfPolicy = "holdfast"

// selfHold is the key of holdfast's own deferrals among a pod's holds. A "/" is in no
// object's name, so no DisruptionPolicy (one named "holdfast" included) shares its hold.
const selfHold = "holdfast/self"

// retryLater is a deferral that is holdfast's own: the decision could not be made or
// recorded now, and a retry will.
func retryLater(why string) Decision {
	return Decision{Guarded: true, Retry: true, Violations: decision.Violations{{Policy: SelfPolicy, Rule: RuleMaxUnavailable, Action: decision.Deny,
		Wait: time.Second, Message: why + "; retry"}}}
}

// notNow answers a read or write of the API server that failed (a ledger, an orphan's
// workload): a slow or overloaded API server is "not now" (429), so that drains retry
// instead of aborting, and an answer comes before the webhook timeout; anything else is
// holdfast's own fault (500).
func (h *Handler) notNow(finish func(Decision) admission.Response, err error) admission.Response {
	if slowAPIServer(err) {
		return finish(slow(err))
	}
	return h.fail(err)
}

// notNowEarly is notNow for a read before the request has what finish answers with: the
// deferral is counted and answered as an eviction's, or as the DELETE of deleted's.
func (h *Handler) notNowEarly(err error, in Input, start time.Time, deleted *corev1.Pod) admission.Response {
	d := slow(err)
	h.Metrics.observe(d, in, h.Clock.Since(start))
	if deleted != nil {
		return respondDelete(d, deleted)
	}
	return respond(d)
}

// namespaceMayLag reports a pod a DisruptionPolicy in force selects by its labels in a
// namespace whose cached labels its namespaceSelector does not: the cache may not show yet
// a relabel that brought the namespace in, and an eviction there would be admitted
// unjudged. The API server sends such an eviction only when its own view of the namespace
// matches an entry's namespaceSelector, so outside that lag it happens only where another
// policy's entry covers the namespace (one GET per such request), and never for a policy
// that leaves the namespace out by its name, which no relabel changes.
func (h *Handler) namespaceMayLag(policies []v1alpha1.DisruptionPolicy, ns string, nsLabels, podLabels map[string]string) bool {
	if h.APIReader == nil {
		return false
	}
	for i := range policies {
		t := &policies[i].Spec.Targets
		if !policies[i].Spec.Suspend && h.Matcher.OutsideByNamespaceOnly(t.NamespaceSelector, t.Selector, ns, nsLabels, podLabels) {
			return true
		}
	}
	return false
}

// liveNamespaceLabels reads a namespace's labels from the API server, within the
// request's deadline.
func (h *Handler) liveNamespaceLabels(ctx context.Context, deadline budget.Deadline, name string) (map[string]string, error) {
	ctx, cancel := deadline.Bound(ctx)
	defer cancel()
	labels, err := policy.LiveNamespaceLabels(ctx, h.APIReader, name)
	h.Metrics.namespaceRead(err)
	return labels, err
}

// slow is holdfast's deferral of a request the API server was too slow for.
func slow(err error) Decision {
	return retryLater(fmt.Sprintf("the API server did not answer in time (%v)", err))
}

// slowAPIServer is whether err is the API server being slow or overloaded, which passes.
func slowAPIServer(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}

// fail answers 500 for holdfast's own faults, and counts them.
func (h *Handler) fail(err error) admission.Response {
	h.Metrics.failed()
	return admission.Errored(http.StatusInternalServerError, err)
}

// fallbackReader reads from the cache, and from the API server what the cache lacks.
type fallbackReader struct {
	cached, live client.Reader
	// deadline bounds the live reads: the request's.
	deadline budget.Deadline
}

func (r fallbackReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.cached.Get(ctx, key, obj, opts...)
	if err != nil && apierrors.IsNotFound(err) && r.live != nil { // IsNotFound(nil) allocates
		ctx, cancel := r.deadline.Bound(ctx)
		defer cancel()
		return r.live.Get(ctx, key, obj, opts...)
	}
	return err
}

func (r fallbackReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.cached.List(ctx, list, opts...)
}

func selectsAny(in Input) bool {
	for _, p := range in.Policies {
		if in.Delete && !p.Spec.GuardDeletes {
			continue
		}
		if ok, _ := in.Matcher.SelectsPods(p.Spec.Targets, in.NamespaceLabels, in.PodLabels); ok {
			return true
		}
	}
	return false
}

// decode reads the Eviction and checks that it names the pod of the URL.
func (h *Handler) decode(req admission.Request) (*policyv1.Eviction, error) {
	if req.Kind.Kind != "Eviction" || req.Resource.Resource != "pods" || req.SubResource != "eviction" {
		return nil, fmt.Errorf("unsupported request for %s %s/%s: this webhook guards pods/eviction", req.Kind.Kind, req.Resource.Resource, req.SubResource)
	}
	ev := &policyv1.Eviction{}
	if err := apijson.Unmarshal(req.Object.Raw, ev); err != nil {
		return nil, fmt.Errorf("decoding the Eviction: %w", err)
	}
	if ev.Name != "" && ev.Name != req.Name {
		return nil, fmt.Errorf("the Eviction names pod %q but the request is for pod %q", ev.Name, req.Name)
	}
	if ev.Namespace != "" && ev.Namespace != req.Namespace {
		return nil, fmt.Errorf("the Eviction is in namespace %q but the request is for namespace %q", ev.Namespace, req.Namespace)
	}
	return ev, nil
}

// deletedPod is what decisions read of the pod a DELETE removes: what the cache keeps of
// pods (identity, ownership, node and readiness), every condition, and the grace period a
// drainer's deadline counts with. The rest (containers, volumes, managed fields, most of
// the status: most of a pod's bytes) is skipped, not decoded.
type deletedPod struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name              string                  `json:"name"`
		Namespace         string                  `json:"namespace"`
		UID               types.UID               `json:"uid"`
		ResourceVersion   string                  `json:"resourceVersion"`
		Labels            map[string]string       `json:"labels"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		CreationTimestamp metav1.Time             `json:"creationTimestamp"`
		DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName                      string `json:"nodeName"`
		TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	} `json:"spec"`
	Status struct {
		Phase      corev1.PodPhase       `json:"phase"`
		Conditions []corev1.PodCondition `json:"conditions"`
	} `json:"status"`
}

// decodeDelete reads the pod a DELETE removes, as the API server holds it (oldObject).
func decodeDelete(req admission.Request) (*corev1.Pod, error) {
	if req.Kind.Kind != "Pod" || req.Resource.Resource != "pods" || req.SubResource != "" {
		return nil, fmt.Errorf("unsupported DELETE of %s %s/%s: this webhook guards pods", req.Kind.Kind, req.Resource.Resource, req.SubResource)
	}
	read := &struct { // one allocation for what is decoded and the pod made of it
		d   deletedPod
		pod corev1.Pod
	}{}
	d, pod := &read.d, &read.pod
	if err := apijson.Unmarshal(req.OldObject.Raw, d); err != nil {
		return nil, fmt.Errorf("decoding the deleted pod: %w", err)
	}
	*pod = corev1.Pod{TypeMeta: d.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: d.Metadata.Name, Namespace: d.Metadata.Namespace, UID: d.Metadata.UID,
			ResourceVersion: d.Metadata.ResourceVersion, Labels: d.Metadata.Labels, OwnerReferences: d.Metadata.OwnerReferences,
			CreationTimestamp: d.Metadata.CreationTimestamp, DeletionTimestamp: d.Metadata.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: d.Spec.NodeName, TerminationGracePeriodSeconds: d.Spec.TerminationGracePeriodSeconds},
		Status: corev1.PodStatus{Phase: d.Status.Phase, Conditions: d.Status.Conditions}}
	// A DELETE collection is admitted pod by pod under the collection's name, "" (the API
	// server's DeleteCollection).
	if (req.Name != "" && pod.Name != req.Name) || pod.Namespace != req.Namespace {
		return nil, fmt.Errorf("the deleted object is pod %s/%s but the request is for pod %s/%s", pod.Namespace, pod.Name, req.Namespace, req.Name)
	}
	return pod, nil
}

// lostNodeTaints are the taints kube's node lifecycle controller puts on a node whose
// kubelet stopped reporting Ready (pkg/controller/nodelifecycle, doNoExecuteTaintingPass
// and doNoScheduleTaintingPass), and the out-of-service taint operators put on a node that
// is down for good.
var lostNodeTaints = []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeOutOfService}

// nodeLost reports a pod on a node tainted as not Ready, unreachable or out of service
// (the lean node cache keeps taints, not conditions). A DELETE's oldObject carries no
// node, so no matchCondition can tell this.
func nodeLost(ctx context.Context, r client.Reader, pod *corev1.Pod) (bool, error) {
	if pod.Spec.NodeName == "" {
		return false, nil
	}
	node := &corev1.Node{}
	if err := informer.Get(ctx, r, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		// A node missing from the cache may be one that joined a moment ago: its pods serve.
		// Pods of a node deleted for good are the pod garbage collector's to delete.
		return false, client.IgnoreNotFound(err)
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(lostNodeTaints, t.Key) {
			return true, nil
		}
	}
	return false, nil
}

// respondDelete maps a decision on a DELETE. "Not now" is 429 without Retry-After:
// client-go retries a 429 that carries one up to ten times inside the call (a DELETE
// included), which would stall kubectl unseen, while a 429 without it returns at once, is
// apierrors.IsTooManyRequests (a temporary refusal, which controllers requeue with
// backoff) and is not mistaken for RBAC's 403. A budget of zero is 403, as for evictions.
// The message names the policy and the way to go through the budget that waits and
// retries: the eviction API.
func respondDelete(d Decision, pod *corev1.Pod) admission.Response {
	if d.Action() != decision.Deny {
		return decision.Allowed(d.Violations)
	}
	msg := "holdfast: the delete of pod " + pod.Namespace + "/" + pod.Name + " is guarded as its eviction is: " + d.Denial() +
		"; evict the pod instead (the eviction API, or kubectl drain without --disable-eviction), which waits for the budget and retries"
	code, reason := int32(http.StatusTooManyRequests), metav1.StatusReasonTooManyRequests
	if d.Never() {
		code, reason = http.StatusForbidden, metav1.StatusReasonForbidden
	}
	// No RetryAfterSeconds: the API server sets the Retry-After header from it.
	err := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
		Details: &metav1.StatusDetails{Name: pod.Name, Kind: "pods", Causes: []metav1.StatusCause{{Type: CauseType, Message: msg}}}}}
	return decision.Denied(err, d.Violations)
}

// respond maps a decision: a deferral is 429 with kube's DisruptionBudget cause and a
// retry-after capped at MaxRetryAfter; a budget of zero is 403; Warn and Audit admit.
func respond(d Decision) admission.Response {
	if d.Action() != decision.Deny {
		return decision.Allowed(d.Violations)
	}
	msg := "holdfast: " + d.Denial()
	if d.Never() {
		err := apierrors.NewGenericServerResponse(http.StatusForbidden, "", schema.GroupResource{}, "", msg, 0, false)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: CauseType, Message: msg}}
		return decision.Denied(err, d.Violations)
	}
	secs := int(math.Ceil(min(d.Wait(), MaxRetryAfter).Seconds()))
	err := apierrors.NewTooManyRequests(msg, max(secs, 1))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: msg}}
	return decision.Denied(err, d.Violations)
}
