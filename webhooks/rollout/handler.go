package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Path is where the rollout webhook is served.
const Path = interception.RolloutPath

// Handler gathers a rollout decision's inputs from the request and the caches,
// calls Decide, and turns the decision into an admission response.
type Handler struct {
	// Reader reads policies, namespaces, workloads and their history; in the manager it
	// is backed by informer caches, so no admission request makes an API call.
	Reader client.Reader
	// Live is the API server, read for the workload whose pod's eviction or DELETE
	// Replacement judges (the cache may not show an edit admitted a moment ago), for a
	// namespace whose cached labels may not show a relabel into a policy's selection
	// (namespaceLabels), and for what a workload created adopts (readAdoptable); nil
	// reads the cache.
	Live    client.Reader
	Decoder admission.Decoder
	Clock   clock.PassiveClock
	// Events records a deny or warn on the workload, at most once per workload, rule and
	// minute; nil records nothing.
	Events *events.Limiter
	// Matcher evaluates the policies' targets, keeping their compiled selectors; nil
	// compiles them on every request.
	Matcher *policy.Matcher
	// Metrics counts decisions; nil counts nothing.
	Metrics *Metrics
	// decide is Decide, unless a test substitutes a broken decision to show that the model
	// explorer finds what it breaks.
	decide func(Input) (Decision, error)
	// Journals are the revision journals from the cache; nil has none, and decisions read
	// the cluster's history alone.
	Journals *journal.Store
	// Typed decodes whole objects with Decoder instead of reading only the fields decisions
	// read (workload.Decode). It is the reference the differential tests hold the lean
	// path to; both decide the same.
	Typed bool
	// Ledgers are the fleet ledgers of starts admitted under fleet limits and the groups'
	// ledgers the eviction guard writes too; nil: the limits count what the journals show
	// only, and shared budgets read no evictions.
	Ledgers *budget.Ledgers
	// Writers are the field managers that last changed each workload's template, which a
	// refusal names; nil names none.
	Writers *informer.Writers

	// starts are the replica's locks on recording starts, one per policy (startLocks).
	starts startLocks
	// written are the fleet ledgers this replica wrote last, by policy UID (readFleet).
	written   map[types.UID]writtenFleet
	writtenMu sync.Mutex
	// reading shares one read of a policy's fleet ledger among the requests that read it
	// meanwhile (readFleet), by policy UID.
	reading singleflight.Group
}

// writtenFleet is a fleet ledger as this replica wrote it, and when.
type writtenFleet struct {
	budget.Fleet
	at time.Time
}

// writtenFresh is how long decisions read a fleet ledger as this replica last wrote it: a
// burst, not longer. A ledger deleted or rewritten by hand since is read within it.
const writtenFresh = 10 * time.Second

// startAttempts bounds the optimistic-concurrency retries on a fleet ledger, the first
// read, before the replica's start locks are taken, included.
const startAttempts = 6

var _ admission.Handler = &Handler{}

// +kubebuilder:rbac:groups=holdfast.dev,resources=rolloutpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces;pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets;controllerrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := h.Clock.Now()

	var policies v1alpha1.RolloutPolicyList
	if err := informer.List(ctx, h.Reader, &policies); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("listing RolloutPolicies: %w", err))
	}
	in, obj, err := h.decode(ctx, req, len(policies.Items) > 0)
	if err != nil {
		return errored(err)
	}
	if in.New == nil || len(policies.Items) == 0 {
		return admission.Allowed("") // DELETE and CONNECT are not guarded.
	}
	in.Policies, in.Matcher = policies.Items, h.Matcher
	in.Now = start
	// What the request reads and writes of the API server shares one deadline from its
	// arrival: bounds per read could add up past the webhook's timeout, where the request
	// fails open under failurePolicy Ignore. Each read bounds its context by it.
	in.Deadline = h.Ledgers.Deadline()
	if in.NamespaceLabels, err = policy.NamespaceLabels(ctx, h.Reader, req.Namespace); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if h.namespaceMayLag(&in) {
		// Best effort: when the API server does not answer in time, the cache's labels
		// decide, as they did before it was asked (another policy's entry may be what sent
		// the request, and that policy judges it).
		if live, err := h.liveNamespaceLabels(ctx, in.Deadline, req.Namespace); err == nil {
			in.NamespaceLabels = live
		} else {
			logf.FromContext(ctx).V(1).Info("Reading the namespace's labels from the API server failed; judging on the cache's", "namespace", req.Namespace, "error", err.Error())
		}
	}
	// The workload's history and nodes come from the cache, or from the API server where no
	// synced watch holds them (a workload entering a selection): under the same deadline.
	if err := h.readWorkloadState(in.Deadline.Carry(ctx), &in); err != nil {
		return errored(err)
	}
	d, err := h.decideAndRecord(ctx, &in, isDryRun(req))
	if err != nil {
		return errored(err)
	}
	h.Metrics.observe(in.New.Kind, d, h.Clock.Since(start))
	if d.Action() == decision.Deny {
		w := h.requestWriters(req, &in)
		d.Writers = &w
	}
	if len(d.Violations) > 0 {
		logf.FromContext(ctx).Info("Rollout policy violated", "workload", in.New.String(), "action", d.Action().String(),
			"dryRun", isDryRun(req), "violations", d.Messages(decision.Audit))
		if !isDryRun(req) {
			if obj == nil {
				obj = reference(in.New)
			}
			recordEvents(h.Events, obj, d.Violations, start)
		}
	}
	return Respond(d)
}

// namespaceMayLag reports a workload whose labels a policy in force selects, in a namespace
// whose cached labels that policy's namespaceSelector does not: the cache may not show yet
// a relabel that brought the namespace in (HandleNamespace admitted it a moment ago), and a
// workload judged unselected there is changed, or relabelled out, unguarded. The API server
// sends holdfast such a request only when its own view of the namespace matches an entry's
// namespaceSelector, so outside that lag it happens only where another policy's entry
// covers the namespace (one GET per such request), and never for a policy that leaves the
// namespace out by its name, which no relabel changes (per-tenant policies).
func (h *Handler) namespaceMayLag(in *Input) bool {
	if h.Live == nil {
		return false
	}
	for i := range in.Policies {
		t := &in.Policies[i].Spec.Targets
		if in.Policies[i].Spec.Suspend || (len(t.Kinds) > 0 && !slices.Contains(t.Kinds, in.New.Kind)) {
			continue
		}
		if in.Matcher.OutsideByNamespaceOnly(t.NamespaceSelector, t.Selector, in.New.Namespace, in.NamespaceLabels, in.New.Labels) ||
			(in.Old != nil && in.Matcher.OutsideByNamespaceOnly(t.NamespaceSelector, t.Selector, in.New.Namespace, in.NamespaceLabels, in.Old.Labels)) {
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
	labels, err := policy.LiveNamespaceLabels(ctx, h.Live, name)
	h.Metrics.namespaceRead(err)
	return labels, err
}

// decideAndRecord decides, and records an admitted start in the ledger of every policy
// with a fleet limit that selects the workload (never on dry-run), deciding again on a
// fresh read when another replica wrote a ledger first.
func (h *Handler) decideAndRecord(ctx context.Context, in *Input, dryRun bool) (Decision, error) {
	decide := h.decide
	if decide == nil {
		decide = Decide
	}
	limited, shared := h.limitedPolicies(in), sharedPolicies(in)
	if len(limited) == 0 && len(shared) == 0 {
		d, err := decide(*in)
		if err != nil {
			// A template read as JSON is decoded in full only when a rule reads it.
			return Decision{}, badRequest("%s: %v", in.New, err)
		}
		return d, nil
	}
	ctx, cancel := in.Deadline.Bound(ctx)
	defer cancel()
	var unlock func()
	woken := false // by a start that filled a fleet, once (startLocks.lock)
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	for attempt := 0; attempt < startAttempts; attempt++ {
		ledgers, group, err := h.readLedgers(ctx, in, limited, shared)
		if err != nil {
			return Decision{}, err
		}
		d, err := decide(*in)
		if err != nil {
			// A template read as JSON is decoded in full only when a rule reads it.
			return Decision{}, badRequest("%s: %v", in.New, err)
		}
		if d.Action() == decision.Deny || dryRun || !d.Starts || (len(ledgers) == 0 && group == nil) {
			return d, nil
		}
		if unlock == nil {
			// A start: decide again on ledgers read under the replica's locks of the
			// policies whose ledgers it writes, then record. A CREATE of fresh pods starts
			// nothing and never gets here; a re-create that adopts a deleted workload's
			// pods is a start like any other.
			if unlock, err = h.starts.lock(ctx, append(slices.Clone(limited), shared...), woken); errors.Is(err, errFilled) {
				// Decided again without the lock: most likely refused now. Once per
				// request, and no attempt used: a rollback woken goes back to wait as before.
				in.Now, woken = h.Clock.Now(), true
				attempt--
				continue
			} else if err != nil {
				return Decision{}, fmt.Errorf("waiting to record the start of %s: %w; retry", in.New, err)
			}
			in.Now = h.Clock.Now()
			continue
		}
		if taken, err := h.nameTaken(ctx, in); err != nil {
			return Decision{}, fmt.Errorf("reading whether %s exists: %w; retry", in.New, err)
		} else if taken {
			// kube answers AlreadyExists after admission: a start recorded for it would hold
			// a slot, and mark the live workload's group ledger, for an object that never is.
			return d, nil
		}
		target, _ := in.New.Template.Sum()
		start := budget.Start{Workload: in.New.Ref.String(), Template: target, At: in.Now, By: h.Ledgers.Self(),
			UID: in.New.UID, Generation: in.New.Generation, Lowered: lowersPartition(*in)}
		if flags := flagsOf(*in); len(flags) > 0 {
			start.Shape, _ = in.New.Template.Shape(flags)
		}
		if err = h.recordStart(ctx, limited, ledgers, start); err == nil {
			err = h.recordBudgetStart(ctx, in, group, start)
		}
		if err == nil {
			h.Metrics.fleetStart(limited, "admitted")
			for _, p := range filled(in, limited) {
				h.starts.fill(p.UID)
			}
			return d, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			return Decision{}, fmt.Errorf("recording the start of %s in a fleet or budget ledger: %w; retry", in.New, err)
		}
		in.Now = h.Clock.Now()
	}
	return Decision{}, fmt.Errorf("the fleet and budget ledgers of %s are contended; retry", in.New)
}

// nameTaken is whether a CREATE's name is taken, in the API server, by another object of
// its kind: kube refuses it with AlreadyExists once admission has answered.
func (h *Handler) nameTaken(ctx context.Context, in *Input) (bool, error) {
	if in.Operation != admissionv1.Create || h.Ledgers == nil {
		return false, nil
	}
	live, err := h.Ledgers.LiveUID(ctx, budget.GroupID(in.New.Ref))
	return live != "" && live != in.New.UID, err
}

// ReadState reads what a decision on the request reads of the cluster besides the request,
// as Handle does before it decides: when the request may start a rollout, the workload's
// revision journal and history, and for the policies with a fleet limit or a shared budget
// that select it, their fleets and the workload's evictions. in must hold the request
// (Operation, Old, New, TemplateChanged, User), the policies and the namespace's labels.
// It writes nothing: holdfast check --cluster reads the cluster through it.
func (h *Handler) ReadState(ctx context.Context, in *Input) error {
	if err := h.readWorkloadState(ctx, in); err != nil {
		return err
	}
	ctx, cancel := h.Ledgers.Bound(ctx)
	defer cancel()
	_, _, err := h.readLedgers(ctx, in, h.limitedPolicies(in), sharedPolicies(in))
	return err
}

// readWorkloadState reads what the decision reads of the cluster about the workload: the
// nodes a new DaemonSet may run on (NeedsNodes), its revision journal and history
// (ReadsRevisions). A template that does not decode is a bad request; a read that fails
// is answered 500, "retry".
func (h *Handler) readWorkloadState(ctx context.Context, in *Input) error {
	if NeedsNodes(*in) {
		spec, err := in.New.Template.Spec()
		if err != nil {
			return badRequest("%s: %v", in.New, err)
		}
		if in.Nodes, err = workload.NodesFor(ctx, h.Reader, &spec.Spec); err != nil {
			return &statusError{http.StatusInternalServerError, fmt.Errorf("listing the nodes %s may run on: %w; retry", in.New, err)}
		}
	}
	if ReadsRevisions(*in) {
		if err := h.readRevisions(ctx, in); err != nil {
			return &statusError{http.StatusInternalServerError, err}
		}
	}
	return nil
}

// readLedgers fills in.Fleets and in.Evictions for the limited and shared policies, and
// returns the ledgers read, which an admitted start is recorded in.
func (h *Handler) readLedgers(ctx context.Context, in *Input, limited, shared []*v1alpha1.RolloutPolicy) (map[string]budget.Fleet, *budget.Group, error) {
	ledgers, err := h.readFleets(ctx, in, limited)
	if err != nil {
		return nil, nil, err
	}
	group, err := h.readEvictionBudgets(ctx, in, shared)
	return ledgers, group, err
}

// limitedPolicies are the policies with a fleet limit that select the workload, when the
// request may start a rollout.
func (h *Handler) limitedPolicies(in *Input) []*v1alpha1.RolloutPolicy {
	if !startsNow(*in) {
		return nil
	}
	return selecting(in, func(r *v1alpha1.RolloutRules) bool { return r.Concurrency != nil })
}

// selecting is the policies in force that select the workload (old or new) and have a
// rule has says they have.
func selecting(in *Input, has func(*v1alpha1.RolloutRules) bool) []*v1alpha1.RolloutPolicy {
	var out []*v1alpha1.RolloutPolicy
	for i := range in.Policies {
		p := &in.Policies[i]
		if !has(&p.Spec.Rules) || p.Spec.Suspend {
			continue
		}
		if selectsNew, selectedOld, err := selection(p, *in); err == nil && (selectsNew || selectedOld) {
			out = append(out, p)
		}
	}
	return out
}

// readFleets fills in.Fleets for the limited policies: the workloads each selects, from the
// cache, their journals, and the policy's ledger of admitted starts, from the API server.
func (h *Handler) readFleets(ctx context.Context, in *Input, limited []*v1alpha1.RolloutPolicy) (map[string]budget.Fleet, error) {
	if len(limited) == 0 {
		return nil, nil
	}
	nsLabels, err := policy.AllNamespaceLabels(ctx, h.Reader)
	if err != nil {
		return nil, fmt.Errorf("reading the namespaces' labels: %w", err)
	}
	in.Fleets = make(map[string]Fleet, len(limited))
	ledgers := map[string]budget.Fleet{}
	journals := h.Journals.Once() // one read of each journal for every count (journal.Once)
	for _, p := range limited {
		selected, err := policy.SelectedWorkloads(ctx, h.Reader, h.Matcher, p.Spec.Targets, nsLabels)
		if err != nil {
			return nil, fmt.Errorf("listing the workloads policy %s selects: %w", p.Name, err)
		}
		var starts []budget.Start
		if h.Ledgers != nil {
			l, err := h.readFleet(ctx, p, in.Now)
			if err != nil {
				return nil, fmt.Errorf("policy %s: %w; retry", p.Name, err)
			}
			ledgers[p.Name], starts = l, l.Records
		}
		f := Fleet{Selected: served(selected, journals, in.New.Ref.String()), Starts: starts}
		f.InFlight, f.Released = inFlight(p, selected, journals, starts, in.New.Ref.String(), in.Now)
		in.Fleets[p.Name] = f
	}
	return ledgers, nil
}

// readFleet reads the policy's fleet ledger: the one this replica wrote in the last
// writtenFresh, when it has written one, or else from the API server. A ledger another
// replica wrote since makes this replica's next write conflict, and the ledger is then read
// afresh; a refusal on the one written last is sound, as starts leave a ledger only by
// lapsing with time, which decisions count. In a burst, only starts reach the API server.
//
// The requests that read the ledger from the API server at once share one read: a burst of
// 500 changes under one policy is one GET, not 500 that queue for the connection's streams
// ahead of the writes that record starts. A read begun before the request arrived is as
// sound as the ledger written last, for the same reason; the read is bounded by the
// ledgers' timeout, not by the first reader's request, and each request waits for it no
// longer than its own deadline.
func (h *Handler) readFleet(ctx context.Context, p *v1alpha1.RolloutPolicy, now time.Time) (budget.Fleet, error) {
	h.writtenMu.Lock()
	f, ok := h.written[p.UID]
	h.writtenMu.Unlock()
	if ok && now.Sub(f.at) < writtenFresh {
		return f.Copy(), nil // a write updates the ledger it was made with
	}
	read := h.reading.DoChan(string(p.UID), func() (any, error) {
		ctx, cancel := h.Ledgers.Bound(context.WithoutCancel(ctx))
		defer cancel()
		return h.Ledgers.ReadFleet(ctx, p)
	})
	select {
	case r := <-read:
		if r.Err != nil {
			return budget.Fleet{}, r.Err
		}
		return r.Val.(budget.Fleet).Copy(), nil // each request its own, to record a start in
	case <-ctx.Done():
		return budget.Fleet{}, ctx.Err()
	}
}

// recordStart writes the start into each policy's ledger; the first failure stops it (the
// caller decides again on a fresh read; a start recorded twice counts once). It keeps each
// ledger written for the next decisions (readFleet), and forgets them all on a failure.
func (h *Handler) recordStart(ctx context.Context, limited []*v1alpha1.RolloutPolicy, ledgers map[string]budget.Fleet, s budget.Start) error {
	for _, p := range limited {
		f := ledgers[p.Name]
		err := f.RecordStart(ctx, h.Ledgers, s)
		// A read shared from before this write, which it may have changed, is joined by
		// no later decision: each reads afresh (readFleet).
		h.reading.Forget(string(p.UID))
		if err != nil {
			h.writtenMu.Lock()
			clear(h.written)
			h.writtenMu.Unlock()
			return err
		}
		h.keepWritten(p.UID, f, s.At)
	}
	return nil
}

// keepWritten keeps the fleet ledger f of the policy with uid as this replica wrote it at
// at, and forgets those written writtenFresh before (deleted policies' too).
func (h *Handler) keepWritten(uid types.UID, f budget.Fleet, at time.Time) {
	h.writtenMu.Lock()
	defer h.writtenMu.Unlock()
	if h.written == nil {
		h.written = map[types.UID]writtenFleet{}
	}
	for old, w := range h.written {
		if at.Sub(w.at) >= writtenFresh {
			delete(h.written, old)
		}
	}
	h.written[uid] = writtenFleet{f.Copy(), at}
}

// readRevisions reads the workload's revision journal and its history from the cache.
// An invalid journal is read as absent (View then falls back to the history and treats
// what that does not show as started now; the Store counted it); a history that cannot
// be read is an error: the revision rules must not decide without it.
func (h *Handler) readRevisions(ctx context.Context, in *Input) error {
	in.Journal = h.Journals.Get(in.New.Kind, in.New.Namespace, in.New.Name)
	var err error
	if in.Old == nil {
		if in.History, err = h.readAdoptable(ctx, in.Deadline, in.New); err != nil {
			return fmt.Errorf("reading what %s would adopt: %w; retry", in.New, err)
		}
		return nil
	}
	if in.History, err = history.Read(ctx, h.Reader, in.Old); err != nil {
		return fmt.Errorf("reading the history of %s: %w; retry", in.Old, err)
	}
	if len(in.History.Revisions) == 0 && (in.Old.Rollout.Fresh || in.Old.Rollout.Progress.Total > 0) {
		// Created moments ago and owning nothing yet: its controller has not adopted what an
		// orphaning delete of a workload of its name left behind, and those pods are its
		// pods already. Or its controller has (its status counts pods) and the cache does
		// not show it yet: the watch of ReplicaSets and revisions lags the workload's.
		if in.History, err = history.ReadAdoptable(ctx, h.Reader, in.Old); err != nil {
			return fmt.Errorf("reading what %s adopts: %w; retry", in.Old, err)
		}
	}
	return nil
}

// readAdoptable reads what a workload created as w adopts (history.ReadAdoptable) from the
// API server (Live), as its controller will find it, never from the cache:
//   - the cache may not show yet the ReplicaSet or revision the last change of a workload
//     of its name made, deleted a moment ago with --cascade=orphan, whose pods the CREATE
//     adopts beside the others (a third template read as a second), and no journal says
//     what it left behind when none records the name, or one was retired while it was
//     not guarded (the change was made outside the selection);
//   - of a held StatefulSet, the cache may still show a pod deleted a moment ago, or the
//     controller reference an orphaning delete has since removed, and what kube keeps of
//     the pods (orphans, one per ordinal in its range) decides whether the CREATE starts
//     its template (startsStaged).
//
// One LIST of ReplicaSets or ControllerRevisions in its namespace by its selector, and
// one of pods when it would adopt any, within the request's bound; a failed read is an
// error (retry), never a decision on the cache. Without Live (holdfast check), the cache.
func (h *Handler) readAdoptable(ctx context.Context, deadline budget.Deadline, w *workload.Workload) (history.History, error) {
	if h.Live == nil {
		return history.ReadAdoptable(ctx, h.Reader, w)
	}
	ctx, cancel := deadline.Bound(ctx)
	defer cancel()
	return history.ReadAdoptable(ctx, h.Live, w)
}

// statusError is a decoding failure with the HTTP status it answers.
type statusError struct {
	code int32
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }

func badRequest(format string, args ...any) error {
	return &statusError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

func errored(err error) admission.Response {
	var se *statusError
	if errors.As(err, &se) {
		return admission.Errored(se.code, se.err)
	}
	return admission.Errored(http.StatusInternalServerError, err)
}

// decode reads the new and old objects of the request as workloads. A scale subresource
// request is read as an update of the cached workload's replicas; it needs the cache
// only when a policy might apply (guarded). The object it returns is what Events are
// recorded on; nil on the lean path, where Handle builds a reference only when needed.
func (h *Handler) decode(ctx context.Context, req admission.Request, guarded bool) (Input, runtime.Object, error) {
	in := Input{Operation: req.Operation, User: req.UserInfo}
	switch req.SubResource {
	case "", "status":
		// A status update's object is the whole workload with the old spec (kube's status
		// strategies put it back); its entry sends only those that change the labels.
	case "scale":
		return h.decodeScale(ctx, req, in, guarded)
	default:
		return in, nil, badRequest("unsupported subresource %q: holdfast guards workloads and their scale and status subresources", req.SubResource)
	}
	if req.Kind.Group != "apps" || req.Kind.Version != "v1" {
		return in, nil, badRequest("unsupported kind %s: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", req.Kind)
	}
	kind := v1alpha1.WorkloadKind(req.Kind.Kind)
	read := func(raw runtime.RawExtension, what string) (runtime.Object, *workload.Workload, error) {
		if !h.Typed {
			var w *workload.Workload
			var err error
			if l, ok := raw.Object.(*workload.Lean); ok { // decoded with the review (review.Webhook.Objects)
				w, err = workload.FromLean(kind, l)
			} else {
				w, err = workload.Decode(kind, raw.Raw)
			}
			if err != nil {
				return nil, nil, badRequest("%s: %v", what, err)
			}
			return nil, w, nil // the Event reference is built only when one is recorded
		}
		obj, err := workload.New(kind)
		if err != nil {
			return nil, nil, badRequest("%v", err)
		}
		if err := h.Decoder.DecodeRaw(raw, obj); err != nil {
			return nil, nil, badRequest("decoding %s as %s: %v", what, kind, err)
		}
		w, err := workload.From(obj)
		return obj, w, err
	}
	var obj runtime.Object
	var err error
	switch req.Operation {
	case admissionv1.Create:
		obj, in.New, err = read(req.Object, "object")
	case admissionv1.Update:
		if len(req.OldObject.Raw) == 0 {
			return in, nil, badRequest("UPDATE request without oldObject")
		}
		if obj, in.New, err = read(req.Object, "object"); err == nil {
			_, in.Old, err = read(req.OldObject, "oldObject")
		}
		in.TemplateChanged = err == nil && !workload.SameTemplate(in.Old.Template, in.New.Template)
	}
	return in, obj, err
}

// reference is what Events are recorded on: the workload's identity.
func reference(w *workload.Workload) runtime.Object {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: string(w.Kind)},
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, UID: w.UID},
	}
}

// decodeScale reads a scale subresource request as an update of the workload's replicas.
func (h *Handler) decodeScale(ctx context.Context, req admission.Request, in Input, guarded bool) (Input, runtime.Object, error) {
	if req.Operation != admissionv1.Update {
		return in, nil, nil
	}
	kind, ok := workload.KindOfResource(req.Resource.Resource)
	if !ok || !workload.Scalable(kind) {
		return in, nil, badRequest("unsupported scale of %s: holdfast guards the scale of Deployments and StatefulSets", req.Resource.Resource)
	}
	scale := &autoscalingv1.Scale{}
	if err := h.Decoder.DecodeRaw(req.Object, scale); err != nil {
		return in, nil, badRequest("decoding object as Scale: %v", err)
	}
	if !guarded {
		return in, nil, nil
	}
	obj, err := workload.New(kind)
	if err != nil {
		return in, nil, err
	}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, obj); err != nil {
		return in, nil, fmt.Errorf("reading %s %s/%s to check its scale: %w; retry", kind, req.Namespace, req.Name, err)
	}
	if in.Old, err = workload.From(obj); err != nil {
		return in, nil, err
	}
	// The scaled workload is the cached one with the new replicas, read as a full update
	// with them would be: everything that resolves against replicas resolves alike (I5).
	scaled := obj.DeepCopyObject()
	workload.SetReplicas(scaled, scale.Spec.Replicas)
	if in.New, err = workload.From(scaled); err != nil {
		return in, nil, err
	}
	return in, scaled, nil
}

func isDryRun(req admission.Request) bool { return req.DryRun != nil && *req.DryRun }

// Respond maps a decision to the admission response: a 403 listing every violation when
// any policy enforces; otherwise allowed, with warnings and audit annotations. Offline
// tools answer with it too, so that their answer is the webhook's.
func Respond(d Decision) admission.Response {
	if d.Action() != decision.Deny {
		return decision.Allowed(d.Violations)
	}
	msg := d.Denial()
	if d.Writers != nil {
		msg += " (" + d.Writers.String() + ")"
	}
	err := apierrors.NewGenericServerResponse(http.StatusForbidden, "", schema.GroupResource{}, "", msg, 0, false)
	for _, v := range d.Violations {
		cause := metav1.StatusCause{Type: CauseType, Message: v.String()}
		if v.Field != nil {
			cause.Field = v.Field.String()
		}
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, cause)
	}
	return decision.Denied(err, d.Violations)
}

// CauseType marks the status causes of holdfast's rollout denials.
const CauseType metav1.CauseType = "holdfast.dev/RolloutPolicy"
