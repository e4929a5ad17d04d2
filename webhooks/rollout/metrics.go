package rollout

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// Metrics are the rollout guard's metrics. A nil *Metrics counts nothing.
type Metrics struct {
	decisions       *prometheus.CounterVec
	decisionSeconds *prometheus.HistogramVec
	fleetStarts     *prometheus.CounterVec
}

// NewMetrics creates the rollout guard's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_rollout_decisions_total",
			Help: "Rollout policy findings by policy, rule, action and workload kind; requests no policy objected to count under policy=\"\".",
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
	}
	for _, c := range []prometheus.Collector{m.decisions, m.decisionSeconds, m.fleetStarts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(kind v1alpha1.WorkloadKind, d Decision, took time.Duration) {
	if m == nil {
		return
	}
	m.decisionSeconds.WithLabelValues(string(kind)).Observe(took.Seconds())
	if len(d.Violations) == 0 {
		m.decisions.WithLabelValues("", "", decision.Allow.String(), string(kind)).Inc()
		return
	}
	for _, v := range d.Violations {
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
