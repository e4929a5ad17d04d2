// Package app is holdfast's composition root: it builds the values the webhooks and
// controllers share (the cache's options and indexes, the selector matcher, the metrics)
// and wires them into a controller-runtime Manager (whose scheme is informer.NewScheme).
// The binary and the integration tests build the same Manager through it.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/controller"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/podscope"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/review"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
	"github.com/holdfast-dev/holdfast/webhooks/floor"
	"github.com/holdfast-dev/holdfast/webhooks/policyvalidation"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// TLSOpts hardens the webhook server: TLS 1.3 only, and HTTP/1.1 only, since HTTP/2
// multiplexes every admission call of an API server over one connection and so
// exposes the server to stream-based resource exhaustion.
func TLSOpts() []func(*tls.Config) {
	return []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS13
		c.NextProtos = []string{"http/1.1"}
	}}
}

// WebhookServer returns the hardened webhook server. It serves the certificate in certDir
// from the moment it appears and reloads it when it changes; until then handshakes fail
// and readiness stays false.
func WebhookServer(ctx context.Context, host string, port int, certDir string) webhook.Server {
	lazy := newLazyCertificate(ctx, certDir)
	opts := append(TLSOpts(), func(c *tls.Config) { c.GetCertificate = lazy.GetCertificate })
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: opts})
}

// CacheOptions trims what holdfast caches to what its decisions read (informer.Options):
// revisions carry their template's fingerprint instead of the template (history.Slim),
// workloads their template packed (workload.Pack) and are held as records
// (workload.Record), of ConfigMaps only the revision journals in holdfast's namespace are
// cached, and of a workload's managed fields only its template's last writer, kept in
// writers.
func CacheOptions(namespace string, writers *informer.Writers) crcache.Options {
	return informer.Options(history.Slim, packThenRecord, namespace, labels.SelectorFromSet(labels.Set{journal.ComponentLabel: journal.Component}), writers)
}

// packThenRecord is the workloads' transform: packed, then held as records.
func packThenRecord(obj any) (any, error) {
	obj, err := workload.Pack(obj)
	if err != nil {
		return obj, err
	}
	return workload.Record(obj)
}

// Options are the settings Setup needs beyond the manager.
type Options struct {
	// Namespace is holdfast's own: the eviction ledgers and the revision journals live there.
	Namespace string
	// Identity names this replica in what it writes, e.g. its pod or host name.
	Identity string
	// LedgerSweepEvery is how often idle eviction ledgers are deleted; 0 means every
	// 10 minutes.
	LedgerSweepEvery time.Duration
	// Webhooks configure the scoped webhook configuration the leader keeps.
	Webhooks WebhookOptions
	// AuditEvery is how often the background audit evaluates the selected workloads beside
	// policy changes; 0 means 5 minutes.
	AuditEvery time.Duration
}

// WebhookOptions say how the leader derives holdfast's scoped webhook configuration.
type WebhookOptions struct {
	// Anchor is the installed ValidatingWebhookConfiguration (the chart's or kustomize's):
	// it says how the API server reaches holdfast and owns the scoped one, named
	// interception.Name(Anchor). Empty means "holdfast".
	Anchor string
	// Rollout and Eviction are the entries' failure policy and timeout where no policy
	// sets one; zero means Ignore and 3 s.
	Rollout, Eviction interception.Defaults
	// NeverHeldDeleters are users whose pod DELETEs are never sent to holdfast, beside
	// kube's own; nil means interception.DefaultNeverHeldDeleters (Karpenter's).
	NeverHeldDeleters []string
	// NarrowAfter is how long replaced entries stay beside their replacements; 0 means 2 s.
	NarrowAfter time.Duration
}

// Shared are the values the webhooks and controllers of one process share.
type Shared struct {
	// Matcher keeps the policies' compiled selectors.
	Matcher  *policy.Matcher
	Rollout  *rollout.Metrics
	Eviction *eviction.Metrics
	Journal  *journal.Metrics
	Webhooks *controller.WebhookMetrics
	Sweeper  *controller.SweeperMetrics
	Policies *controller.PolicyMetrics
	// CRDsOutdated is 1 when the start-up check found an installed CRD lacking fields.
	CRDsOutdated prometheus.Gauge
	// Journals are the revision journals, fed by the ConfigMap informer, which decisions
	// and the policy status read.
	Journals *journal.Store
	// Holds are how long the eviction guard has deferred each pod's evictions (maxHold),
	// which holdfast_eviction_longest_hold_seconds reads at each scrape.
	Holds *eviction.Holds
	// Writers are the field managers that last changed each workload's template, fed by
	// the workload informers' transform (CacheOptions): refusals name them and the
	// journal recorders record them.
	Writers *informer.Writers
	// Pods are the pod cache, scoped to the guarded workloads: the manager's cache reads
	// pods through it when the manager is built with its NewCache.
	Pods *podscope.Scope
}

// NewShared builds the shared values and registers the metrics with reg (in the binary,
// controller-runtime's registry, which its metrics server serves).
func NewShared(reg prometheus.Registerer) (*Shared, error) {
	r, err := rollout.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the rollout guard's metrics: %w", err)
	}
	e, err := eviction.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the eviction guard's metrics: %w", err)
	}
	j, err := journal.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the revision journal's metrics: %w", err)
	}
	w, err := controller.NewWebhookMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the webhook configuration's metrics: %w", err)
	}
	sw, err := controller.NewSweeperMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the ledger sweeper's metrics: %w", err)
	}
	pm, err := controller.NewPolicyMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the policies' metrics: %w", err)
	}
	crds, err := NewCRDsOutdated(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the CRD check's metric: %w", err)
	}
	holds := &eviction.Holds{}
	if err := eviction.RegisterHolds(reg, holds, time.Now); err != nil {
		return nil, fmt.Errorf("registering the eviction holds' metric: %w", err)
	}
	pods, err := podscope.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering the pod scope's metrics: %w", err)
	}
	return &Shared{Pods: podscope.New(pods), Matcher: policy.NewMatcher(), Rollout: r, Eviction: e, Journal: j, Webhooks: w, Sweeper: sw, Policies: pm,
		CRDsOutdated: crds, Holds: holds, Journals: &journal.Store{Metrics: j, Log: ctrl.Log.WithName("journal")}, Writers: informer.NewWriters()}, nil
}

// Setup registers holdfast's webhooks and its controllers with one manager (SetupWebhooks
// and SetupControllers).
func Setup(ctx context.Context, mgr manager.Manager, o Options, s *Shared) error {
	if err := SetupWebhooks(ctx, mgr, o, s); err != nil {
		return err
	}
	return SetupControllers(mgr, o, s)
}

// forgetWriter drops the template writer of a deleted workload.
func (s *Shared) forgetWriter(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, ok := obj.(client.Object); ok {
		s.Writers.Forget(m.GetUID())
	}
}

// SetupWebhooks registers holdfast's webhooks and readiness checks with the manager,
// starts the informers decisions read, so that readiness waits for them to sync, and
// compares the installed CRDs with this build's (CRDCheck).
func SetupWebhooks(ctx context.Context, mgr manager.Manager, o Options, s *Shared) error {
	if err := informer.IndexOwners(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	informers := []client.Object{
		&v1alpha1.RolloutPolicy{}, &v1alpha1.DisruptionPolicy{}, policy.NamespaceMetadata(),
		&appsv1.ReplicaSet{}, &appsv1.ControllerRevision{}, &corev1.Node{},
	}
	// Pods are cached as the guarded workloads need them (podscope), when the manager's
	// cache reads them through the Scope; otherwise every pod is.
	_, scoped := mgr.GetCache().(*podscope.Cache)
	if !scoped {
		informers = append(informers, &corev1.Pod{})
	}
	for _, k := range workload.Kinds() {
		obj, _ := workload.New(k)
		informers = append(informers, obj)
	}
	var started []crcache.Informer
	for _, obj := range informers {
		inf, err := mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("starting informer for %T: %w", obj, err)
		}
		started = append(started, inf)
		switch obj.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet:
		default:
			continue
		}
		// The transform keeps a workload's template writer; a deleted one is dropped.
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: s.forgetWriter}); err != nil {
			return fmt.Errorf("forgetting deleted workloads' writers: %w", err)
		}
	}
	journals := s.Journals
	cms, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return fmt.Errorf("starting informer for the revision journals: %w", err)
	}
	fed, err := cms.AddEventHandler(journals.Handler())
	if err != nil {
		return fmt.Errorf("feeding the revision journals: %w", err)
	}

	live, err := liveClient(mgr)
	if err != nil {
		return err
	}
	if scoped {
		s.Pods.SetLive(live)
		if err := mgr.Add(&podscope.Planner{Scope: s.Pods, Cache: mgr.GetCache(), Matcher: s.Matcher,
			Log: mgr.GetLogger().WithName("pods")}); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("pods", func(*http.Request) error { return s.Pods.Ready() }); err != nil {
			return err
		}
	}
	rolloutHandler, evictionHandler := guardsOf(mgr, live, o, s).Handlers()
	srv := mgr.GetWebhookServer()
	// Every path answers the self-test's probes (answerSelfTest) before its handler.
	srv.Register(rollout.Path, review.NewWebhook(&admission.Webhook{Handler: answerSelfTest(rollout.Path, rolloutHandler), RecoverPanic: ptr.To(true)},
		workload.DecodeObject))
	srv.Register(eviction.Path, review.NewWebhook(&admission.Webhook{Handler: answerSelfTest(eviction.Path, evictionHandler), RecoverPanic: ptr.To(true)}, nil))
	srv.Register(rollout.NamespacePath, review.NewWebhook(&admission.Webhook{Handler: answerSelfTest(rollout.NamespacePath, admission.HandlerFunc(rolloutHandler.HandleNamespace)),
		RecoverPanic: ptr.To(true)}, nil))
	srv.Register(eviction.DeletePath, review.NewWebhook(&admission.Webhook{Handler: answerSelfTest(eviction.DeletePath, evictionHandler), RecoverPanic: ptr.To(true)}, nil))
	srv.Register(rollout.PodRelabelPath, review.NewWebhook(&admission.Webhook{Handler: answerSelfTest(rollout.PodRelabelPath, admission.HandlerFunc(rolloutHandler.HandlePodRelabel)),
		RecoverPanic: ptr.To(true)}, nil))

	srv.Register(floor.Path, review.NewWebhook(&admission.Webhook{
		Handler:      answerSelfTest(floor.Path, &floor.Handler{Reader: mgr.GetCache(), Matcher: s.Matcher, Clock: clock.RealClock{}}),
		RecoverPanic: ptr.To(true),
	}, nil))
	srv.Register(policyvalidation.Path, review.NewWebhook(&admission.Webhook{
		Handler:      answerSelfTest(policyvalidation.Path, &policyvalidation.Handler{}),
		RecoverPanic: ptr.To(true),
	}, nil))

	// Every replica compares the installed CRDs with its own, once (CRDCheck).
	crds, err := NewCRDReader(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := mgr.Add(&CRDCheck{Reader: crds, Events: mgr.GetEventRecorder("holdfast"), Outdated: s.CRDsOutdated,
		Log: mgr.GetLogger().WithName("crds")}); err != nil {
		return err
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	synced := cacheSynced(started, fed)
	if err := mgr.AddReadyzCheck("caches", synced); err != nil {
		return err
	}
	// The informers' first lists collect at syncGCPercent, from now until they and the
	// pod scope's watches have synced.
	caches := &syncPhase{name: "caches", log: mgr.GetLogger().WithName("gc"), ready: func() error {
		if err := synced(nil); err != nil || !scoped {
			return err
		}
		return s.Pods.Ready()
	}}
	caches.begin()
	if err := mgr.Add(cachePhase{caches}); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook", srv.StartedChecker())
}

// SetupControllers registers the policy status controllers, the PDB generator and the
// eviction ledgers' sweeper. They read through the manager's cache, whose informers and
// indexes SetupWebhooks set up: with leader election, the binary gives them a manager of
// their own over the same cache (SharedCache), so that losing the lease stops them and not
// the webhooks.
func SetupControllers(mgr manager.Manager, o Options, s *Shared) error {
	clk := clock.RealClock{}
	// Reads from the cache, whose informers' stores the walks read in place (informer.Each).
	cached := informer.WithInformers(mgr.GetClient(), mgr.GetCache())
	audit := func(p *v1alpha1.RolloutPolicy, obj client.Object, nsLabels map[string]string, now time.Time) (decision.Violations, error) {
		return rollout.Audit(p, obj, nsLabels, s.Matcher, now)
	}
	if err := (&controller.RolloutPolicyStatus{Client: cached, Matcher: s.Matcher, Journals: s.Journals,
		Audit: audit, AuditEvery: o.AuditEvery, Events: &events.Limiter{Recorder: mgr.GetEventRecorder("holdfast")}, Metrics: s.Policies, Clock: clk}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the RolloutPolicy status controller: %w", err)
	}

	if err := (&controller.DisruptionPolicyStatus{Client: cached, Matcher: s.Matcher, Metrics: s.Policies, Clock: clk}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DisruptionPolicy status controller: %w", err)
	}

	// The controllers' first reconciles, of every workload, collect at syncGCPercent from
	// when this replica runs them (it took the lease) until their queues have drained.
	if err := mgr.Add(&syncPhase{name: "controllers", log: mgr.GetLogger().WithName("gc"),
		ready: func() error { return queuesDrained(metrics.Registry) }}); err != nil {
		return err
	}
	for _, kind := range workload.Kinds() {
		r := &controller.PDBGenerator{Client: cached, Kind: kind, Matcher: s.Matcher, Clock: clk,
			Events: &events.Limiter{Recorder: mgr.GetEventRecorder("holdfast")}}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the PDB generator for %ss: %w", kind, err)
		}
	}

	live, err := liveClient(mgr)
	if err != nil {
		return err
	}
	guards := guardsOf(mgr, live, o, s)
	for _, kind := range workload.Kinds() {
		if err := guards.JournalRecorder(kind).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the revision journal of %ss: %w", kind, err)
		}
	}

	anchor := cmp.Or(o.Webhooks.Anchor, "holdfast")
	neverHeld := o.Webhooks.NeverHeldDeleters
	if neverHeld == nil {
		neverHeld = interception.DefaultNeverHeldDeleters
	}
	withDefaults := func(d interception.Defaults) interception.Defaults {
		d.FailurePolicy = cmp.Or(d.FailurePolicy, admissionregistrationv1.Ignore)
		d.TimeoutSeconds = cmp.Or(d.TimeoutSeconds, 3)
		return d
	}
	if err := (&controller.WebhookConfiguration{Client: mgr.GetClient(), Name: interception.Name(anchor), Anchor: anchor,
		Namespace: o.Namespace, Rollout: withDefaults(o.Webhooks.Rollout), Eviction: withDefaults(o.Webhooks.Eviction),
		NeverHeldDeleters: neverHeld,
		NarrowAfter:       o.Webhooks.NarrowAfter, Metrics: s.Webhooks, Clock: clk}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the scoped webhook configuration: %w", err)
	}

	every := o.LedgerSweepEvery
	if every == 0 {
		every = 10 * time.Minute
	}
	return mgr.Add(&controller.LedgerSweeper{Ledgers: &budget.Ledgers{Live: live, Namespace: o.Namespace},
		Policies: mgr.GetCache(), Every: every, Clock: clk, Metrics: s.Sweeper})
}

// liveClient reads from and writes to the API server, without a cache and without
// client-go's client-side rate limiter: every guarded eviction reads and writes its
// group's ledger, and the answers of a drain of hundreds of pods must not queue behind a
// limit of 20 requests a second until the webhook times out and fails open. The API
// server's own priority and fairness still applies, and a slow answer is bounded by the
// ledgers' timeout (budget.Ledgers).
func liveClient(mgr manager.Manager) (client.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the live client for the budget ledgers: %w", err)
	}
	return c, nil
}

// SharedCache lends a started cache to another manager: its Start waits for the context
// instead of starting informers the owner already runs.
func SharedCache(c crcache.Cache) crcache.Cache { return sharedCache{c} }

type sharedCache struct{ crcache.Cache }

func (c sharedCache) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// cacheSynced is ready once the informers the webhooks read have synced. It does not wait
// on the informers the controllers add when this replica takes the lease: a slow one of
// theirs must not take the webhooks out of the endpoints.
func cacheSynced(informers []crcache.Informer, handlers ...toolscache.ResourceEventHandlerRegistration) healthz.Checker {
	return func(*http.Request) error {
		for _, h := range handlers {
			if !h.HasSynced() {
				return errors.New("the revision journals have not been read")
			}
		}
		for _, inf := range informers {
			if !inf.HasSynced() {
				return errors.New("informer caches have not synced")
			}
		}
		return nil
	}
}
