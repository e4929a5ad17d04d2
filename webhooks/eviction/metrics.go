package eviction

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/holdfast-dev/holdfast/internal/policy"
)

var (
	evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "holdfast_evictions_total",
		Help: "Evictions of pods DisruptionPolicies select, by policy, outcome (allowed, deferred, denied, warned, audited) and rule; unguarded owners count under outcome=\"unguarded\".",
	}, []string{"policy", "outcome", "rule"})

	deferredSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "holdfast_eviction_deferred_wait_seconds",
		Help:    "The wait holdfast announced when it deferred an eviction.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	})

	evictionDecisionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "holdfast_eviction_decision_duration_seconds",
		Help:    "Time to gather inputs and decide an eviction of a selected pod, ledger writes included.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25},
	})

	ledgersDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "holdfast_eviction_ledgers_deleted_total",
		Help: "Eviction ledgers (Leases) deleted after admitting no eviction for longer than their records are kept.",
	})
)

func init() {
	metrics.Registry.MustRegister(evictions, deferredSeconds, evictionDecisionSeconds, ledgersDeleted)
}

func observe(d Decision, in Input, took time.Duration) {
	evictionDecisionSeconds.Observe(took.Seconds())
	if in.Group == nil {
		evictions.WithLabelValues("", "unguarded", "").Inc()
		return
	}
	if len(d.Violations) == 0 {
		evictions.WithLabelValues("", "allowed", "").Inc()
		return
	}
	for _, v := range d.Violations {
		outcome := map[policy.Action]string{policy.Audit: "audited", policy.Warn: "warned", policy.Deny: "deferred"}[v.Action]
		if v.Action == policy.Deny && v.Never {
			outcome = "denied"
		}
		evictions.WithLabelValues(v.Policy, outcome, v.Rule).Inc()
	}
	if d.Action() == policy.Deny && !d.Never() {
		deferredSeconds.Observe(d.Wait().Seconds())
	}
}
