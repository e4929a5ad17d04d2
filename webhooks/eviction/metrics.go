package eviction

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-dev/holdfast/internal/decision"
)

// Metrics are the eviction guard's metrics. A nil *Metrics counts nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	reviews  *prometheus.CounterVec
	findings *prometheus.CounterVec
	// evictions is the deprecated holdfast_evictions_total, kept unchanged for one release.
	evictions       *prometheus.CounterVec
	deferredSeconds prometheus.Histogram
	decisionSeconds prometheus.Histogram
	errors          prometheus.Counter
	heldSeconds     prometheus.Histogram
	heldLong        *prometheus.CounterVec
	namespaceReads  *prometheus.CounterVec
	groupReads      *prometheus.CounterVec
}

// NewMetrics creates the eviction guard's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_eviction_requests_total",
			Help: "Eviction (and guarded DELETE) requests of pods DisruptionPolicies select, each counted once, by the outcome of the request: allowed (no finding), deferred (429), denied (403), warned, audited, released (let go after maxHold), unguarded (no policy applied: owners holdfast does not guard, pods already going, exempt requesters). Per policy: holdfast_eviction_reviews_total.",
		}, []string{"outcome"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_eviction_reviews_total",
			Help: "Eviction (and guarded DELETE) requests of pods DisruptionPolicies select, counted once under each policy that applied (a request two policies apply to counts once under each), by policy and the outcome that policy gave: allowed (it found nothing), deferred, denied, warned, audited, released (let go after maxHold); holdfast's own deferral (its ledger slow or contended) counts as deferred under each policy that applied. Requests no policy applied to are counted in holdfast_eviction_requests_total only.",
		}, []string{"policy", "outcome"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_eviction_findings_total",
			Help: "Findings of DisruptionPolicies on eviction requests, one per policy and rule that objected, by policy, outcome (deferred, denied, warned, audited, released) and rule: a request with two findings counts twice here, once in holdfast_eviction_reviews_total.",
		}, []string{"policy", "outcome", "rule"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_evictions_total",
			Help: "Deprecated, removed in the next release: use holdfast_eviction_requests_total (requests), holdfast_eviction_reviews_total (requests per policy) and holdfast_eviction_findings_total (findings). Findings on evictions of pods DisruptionPolicies select, by policy, outcome (allowed, deferred, denied, warned, audited, released: let go after maxHold) and rule; evictions with no finding count under policy=\"\", outcome=\"allowed\", unguarded owners under outcome=\"unguarded\".",
		}, []string{"policy", "outcome", "rule"}),
		deferredSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdfast_eviction_deferred_wait_seconds",
			Help:    "The wait holdfast announced when it deferred an eviction.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
		}),
		decisionSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdfast_eviction_decision_duration_seconds",
			Help:    "Time to gather inputs and decide an eviction of a selected pod, ledger writes included.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25},
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdfast_eviction_errors_total",
			Help: "Evictions answered 500: holdfast could not read its cache or its ledger (a slow API server is answered 429 instead).",
		}),
		heldSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdfast_eviction_held_seconds",
			Help:    "How long a pod's evictions were deferred without a break before one was admitted, as this replica saw them.",
			Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}),
		heldLong: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_eviction_held_too_long_total",
			Help: "Deferrals of evictions whose pod had been held longer than the deferring policy's maxHold, by policy.",
		}, []string{"policy"}),
		namespaceReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_eviction_namespace_live_reads_total",
			Help: "Namespaces read from the API server because the cache showed one outside a DisruptionPolicy's namespaceSelector that would otherwise select the pod (a relabel into the selection the cache may not show yet), by result: read, or failed (judged on the cache's labels then).",
		}, []string{"result"}),
		groupReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_eviction_group_live_reads_total",
			Help: "Groups whose pods were read from the API server because the decision on the cache's pods would let a Ready pod go that a policy guards or that an exempt requester's eviction takes down (a cache that lags may show a pod replaced a moment ago still Ready), by result: admitted (the live pods admit it too), deferred (they do not: the cache lagged), or failed (the eviction was deferred, 429).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.reviews, m.findings, m.evictions, m.deferredSeconds, m.decisionSeconds, m.errors, m.heldSeconds, m.heldLong, m.namespaceReads, m.groupReads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// outcome names what a violation did to the eviction, for holdfast_eviction_findings_total
// (and the deprecated holdfast_evictions_total).
func outcome(v decision.Violation) string {
	switch {
	case v.Rule == RuleMaxHold:
		return "released"
	case v.Action == decision.Deny && v.Never:
		return "denied"
	case v.Action == decision.Deny:
		return "deferred"
	case v.Action == decision.Warn:
		return "warned"
	default:
		return "audited"
	}
}

// severity orders the outcomes of one policy's findings: a request a policy both defers
// and refuses for ever was refused.
var severity = map[string]int{"audited": 1, "warned": 2, "released": 3, "deferred": 4, "denied": 5}

// policyOutcome is the outcome policy gave the request: the most severe of its findings,
// allowed without any.
func policyOutcome(vs decision.Violations, policy string) string {
	out := "allowed"
	for _, v := range vs {
		if o := outcome(v); v.Policy == policy && severity[o] > severity[out] {
			out = o
		}
	}
	return out
}

// requestOutcome is what the request came to: its most severe finding's outcome. A retry
// holdfast asks for itself (retryLater) is a deferral of a guarded pod, never unguarded.
func requestOutcome(d Decision) string {
	if len(d.Applied.Names()) == 0 && !d.Retry {
		return "unguarded"
	}
	out := "allowed"
	for _, v := range d.Violations {
		if o := outcome(v); severity[o] > severity[out] {
			out = o
		}
	}
	return out
}

func (m *Metrics) observe(d Decision, in Input, took time.Duration) {
	if m == nil {
		return
	}
	m.decisionSeconds.Observe(took.Seconds())
	m.requests.WithLabelValues(requestOutcome(d)).Inc()
	// Reviews: the request once under each policy that applied, whatever it found.
	for _, p := range d.Applied.Names() {
		o := policyOutcome(d.Violations, p)
		if d.Retry {
			o = "deferred" // holdfast's own deferral, under every policy that applies
		}
		m.reviews.WithLabelValues(p, o).Inc()
	}
	for _, v := range d.Violations {
		m.findings.WithLabelValues(v.Policy, outcome(v), v.Rule).Inc()
	}
	m.deprecated(d, in)
	if d.Action() == decision.Deny && !d.Never() {
		m.deferredSeconds.Observe(d.Wait().Seconds())
	}
}

// deprecated counts holdfast_evictions_total as the previous release did.
func (m *Metrics) deprecated(d Decision, in Input) {
	switch {
	case in.Group == nil:
		m.evictions.WithLabelValues("", "unguarded", "").Inc()
	case len(d.Violations) == 0:
		m.evictions.WithLabelValues("", "allowed", "").Inc()
	}
	for _, v := range d.Violations {
		m.evictions.WithLabelValues(v.Policy, outcome(v), v.Rule).Inc()
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.errors.Inc()
	}
}

func (m *Metrics) held(d time.Duration) {
	if m != nil {
		m.heldSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) heldTooLong(policy string) {
	if m != nil {
		m.heldLong.WithLabelValues(policy).Inc()
	}
}

// longestHold is holdfast_eviction_longest_hold_seconds.
var longestHold = prometheus.NewDesc("holdfast_eviction_longest_hold_seconds",
	"Per DisruptionPolicy, how long the pod it has held longest, as this replica sees it, has had its evictions deferred by that policy without a break (a minute without a retry ends a hold; an admitted eviction ends it). A policy holding no pod has no series. The alert HoldfastEvictionStuck reads it: unlike holdfast_eviction_reviews_total, it is not silenced by the same policy admitting evictions in another group.",
	[]string{"policy"}, nil)

// holdsCollector reads holdfast_eviction_longest_hold_seconds from the holds at each
// scrape.
type holdsCollector struct {
	holds *Holds
	now   func() time.Time
}

func (c holdsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- longestHold }

func (c holdsCollector) Collect(ch chan<- prometheus.Metric) {
	for name, held := range c.holds.Longest(c.now()) {
		ch <- prometheus.MustNewConstMetric(longestHold, prometheus.GaugeValue, held.Seconds(), name)
	}
}

// RegisterHolds registers holdfast_eviction_longest_hold_seconds with reg, read from holds
// as of now() at each scrape.
func RegisterHolds(reg prometheus.Registerer, holds *Holds, now func() time.Time) error {
	return reg.Register(holdsCollector{holds: holds, now: now})
}

// groupRead counts a live read of a group's pods (Handler.confirmLive) by what it decided.
func (m *Metrics) groupRead(d Decision, err error) {
	if m == nil {
		return
	}
	result := "admitted"
	switch {
	case err != nil:
		result = "failed"
	case d.Action() == decision.Deny:
		result = "deferred"
	}
	m.groupReads.WithLabelValues(result).Inc()
}

// namespaceRead counts a namespace read live, and whether the read failed.
func (m *Metrics) namespaceRead(err error) {
	if m == nil {
		return
	}
	result := "read"
	if err != nil {
		result = "failed"
	}
	m.namespaceReads.WithLabelValues(result).Inc()
}
