package rollout

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// Metrics are the rollout guard's metrics. A nil *Metrics counts nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	reviews  *prometheus.CounterVec
	findings *prometheus.CounterVec
	// decisions is the deprecated holdfast_rollout_decisions_total, kept unchanged for one
	// release.
	decisions       *prometheus.CounterVec
	decisionSeconds *prometheus.HistogramVec
	fleetStarts     *prometheus.CounterVec
	namespaceReads  *prometheus.CounterVec
}

// NewMetrics creates the rollout guard's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_requests_total",
			Help: "Admission requests of guarded workload kinds, each counted once, by the outcome of the request (allowed: no finding, denied, warned, audited; unguarded: no policy selected the workload) and workload kind. Per policy: holdfast_rollout_reviews_total.",
		}, []string{"outcome", "kind"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_reviews_total",
			Help: "Admission requests of guarded workloads, counted once under each RolloutPolicy that selected the workload (a request two policies select counts once under each), by policy, the outcome that policy gave (allowed: it found nothing, denied, warned, audited) and workload kind. Requests no policy selected are counted in holdfast_rollout_requests_total only.",
		}, []string{"policy", "outcome", "kind"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_findings_total",
			Help: "Findings of RolloutPolicies on admission requests, one per policy and rule that objected, by policy, rule, action (deny, warn, audit) and workload kind: a request with two findings counts twice here, once in holdfast_rollout_reviews_total.",
		}, []string{"policy", "rule", "action", "kind"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_decisions_total",
			Help: "Deprecated, removed in the next release: use holdfast_rollout_requests_total (requests), holdfast_rollout_reviews_total (requests per policy) and holdfast_rollout_findings_total (findings). Rollout policy findings by policy, rule, action and workload kind; requests no policy objected to count under policy=\"\".",
		}, []string{"policy", "rule", "action", "kind"}),
		decisionSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "holdfast_rollout_decision_duration_seconds",
			Help:    "Time to gather inputs and decide a rollout admission request.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1},
		}, []string{"kind"}),
		fleetStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_fleet_starts_total",
			Help: "Starts of rollouts under a policy's fleet limit (rules.concurrency), by policy and outcome: admitted (recorded in its ledger) or held.",
		}, []string{"policy", "outcome"}),
		namespaceReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_namespace_live_reads_total",
			Help: "Namespaces read from the API server because the cache showed one outside a RolloutPolicy's namespaceSelector that would otherwise select the workload (a relabel into the selection the cache may not show yet), by result: read, or failed (judged on the cache's labels then).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.reviews, m.findings, m.decisions, m.decisionSeconds, m.fleetStarts, m.namespaceReads} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// outcomes name what a policy's strictest finding did to the request.
var outcomes = map[decision.Action]string{decision.Allow: "allowed", decision.Audit: "audited",
	decision.Warn: "warned", decision.Deny: "denied"}

// policyAction is the strictest action of policy's findings, Allow without any.
func policyAction(vs decision.Violations, policy string) decision.Action {
	a := decision.Allow
	for _, v := range vs {
		if v.Policy == policy {
			a = max(a, v.Action)
		}
	}
	return a
}

func (m *Metrics) observe(kind v1alpha1.WorkloadKind, d Decision, took time.Duration) {
	if m == nil {
		return
	}
	m.decisionSeconds.WithLabelValues(string(kind)).Observe(took.Seconds())
	if len(d.Applied.Names()) == 0 {
		m.requests.WithLabelValues("unguarded", string(kind)).Inc()
	} else {
		m.requests.WithLabelValues(outcomes[d.Action()], string(kind)).Inc()
	}
	// Reviews: the request once under each policy that applied, whatever it found.
	for _, p := range d.Applied.Names() {
		m.reviews.WithLabelValues(p, outcomes[policyAction(d.Violations, p)], string(kind)).Inc()
	}
	if len(d.Violations) == 0 {
		m.decisions.WithLabelValues("", "", decision.Allow.String(), string(kind)).Inc()
		return
	}
	for _, v := range d.Violations {
		m.findings.WithLabelValues(v.Policy, v.Rule, v.Action.String(), string(kind)).Inc()
		m.decisions.WithLabelValues(v.Policy, v.Rule, v.Action.String(), string(kind)).Inc()
		if v.Rule == RuleConcurrency && v.Action == decision.Deny {
			m.fleetStarts.WithLabelValues(v.Policy, "held").Inc()
		}
	}
}

// fleetStart counts a start under the policies' fleet limits.
func (m *Metrics) fleetStart(policies []*v1alpha1.RolloutPolicy, outcome string) {
	if m == nil {
		return
	}
	for _, p := range policies {
		m.fleetStarts.WithLabelValues(p.Name, outcome).Inc()
	}
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
