package app

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/controller"
	holdfastevents "github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// Guards builds holdfast's two admission handlers and its revision-journal recorders from
// their dependencies. The server (SetupWebhooks, SetupControllers) and `holdfast simulate`
// both build them here and nowhere else, so that a dependency the server gives a handler
// reaches the simulator's handler too: what simulate replays is what the server runs.
type Guards struct {
	// Cache is what decisions read: policies, namespaces, workloads, their revisions and
	// pods (the manager's informer cache; the simulator's store).
	Cache client.Reader
	// Live reads from and writes to the API server without a cache: the budget ledgers,
	// and the pods the cache has not seen yet.
	Live client.Client
	// Client is the controllers' client, which the journal recorders read and write
	// through (the manager's: cached reads, writes to the API server).
	Client client.Client
	// Scheme decodes the objects of admission requests.
	Scheme *runtime.Scheme
	Clock  clock.PassiveClock
	// Events records Events, at most one per object, rule and minute per handler; nil
	// records none (the simulator).
	Events events.EventRecorder
	// Namespace is holdfast's own, where the ledgers and journals live; Identity names
	// this replica in the ledgers' records.
	Namespace, Identity string
	// Shared are the process's Matcher, journal store and metrics.
	Shared *Shared
}

// guardsOf is the server's Guards over one manager: its cache, client, scheme and Event
// recorder, the real clock, and live, the ledgers' client.
func guardsOf(mgr manager.Manager, live client.Client, o Options, s *Shared) Guards {
	return Guards{Cache: mgr.GetCache(), Live: live, Client: informer.WithInformers(mgr.GetClient(), mgr.GetCache()), Scheme: mgr.GetScheme(), Clock: clock.RealClock{},
		Events: mgr.GetEventRecorder("holdfast"), Namespace: o.Namespace, Identity: o.Identity, Shared: s}
}

// Ledgers are the budget ledgers both guards read and write.
func (g Guards) Ledgers() *budget.Ledgers {
	return &budget.Ledgers{Live: g.Live, Namespace: g.Namespace, Identity: g.Identity}
}

// Handlers are the rollout guard's and the eviction guard's admission handlers, sharing
// one set of ledgers.
func (g Guards) Handlers() (*rollout.Handler, *eviction.Handler) {
	ledgers := g.Ledgers()
	r := &rollout.Handler{
		Reader:   g.Cache,
		Live:     g.Live,
		Decoder:  admission.NewDecoder(g.Scheme),
		Clock:    g.Clock,
		Events:   g.limiter(),
		Matcher:  g.Shared.Matcher,
		Metrics:  g.Shared.Rollout,
		Journals: g.Shared.Journals,
		Ledgers:  ledgers,
		Writers:  g.Shared.Writers,
	}
	e := &eviction.Handler{
		Reader:    g.Cache,
		APIReader: g.Live,
		Ledgers:   ledgers,
		Clock:     g.Clock,
		Events:    g.limiter(),
		Matcher:   g.Shared.Matcher,
		Metrics:   g.Shared.Eviction,
		Holds:     g.Shared.Holds,
		Journals:  g.Shared.Journals,
		// An eviction that gives a staged template its first pod is a start the rollout
		// guard judges.
		Replacements: r,
	}
	return r, e
}

// JournalRecorder is the revision journal's recorder for the workloads of one kind (the
// leader runs one per kind).
func (g Guards) JournalRecorder(kind v1alpha1.WorkloadKind) *controller.JournalRecorder {
	return &controller.JournalRecorder{Client: g.Client, Kind: kind, Namespace: g.Namespace, Matcher: g.Shared.Matcher,
		Clock: g.Clock, Metrics: g.Shared.Journal, Writers: g.Shared.Writers, Live: g.Live}
}

// limiter is a handler's own Event limiter, or nil without a recorder.
func (g Guards) limiter() *holdfastevents.Limiter {
	if g.Events == nil {
		return nil
	}
	return &holdfastevents.Limiter{Recorder: g.Events}
}
