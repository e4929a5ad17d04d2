package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyMetrics say which policies are not in force and why: the status controllers set
// them with each policy's Ready condition, on the leader.
type PolicyMetrics struct {
	notReady      *prometheus.GaugeVec
	floorWeakened *prometheus.GaugeVec
	fights        *prometheus.GaugeVec
}

// NewPolicyMetrics registers the policies' metrics with reg.
func NewPolicyMetrics(reg prometheus.Registerer) (*PolicyMetrics, error) {
	m := &PolicyMetrics{notReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "holdfast_policy_not_ready",
		Help: "1 for each policy whose Ready condition is False, by reason (InvalidWindow, InvalidSelector, Suspended): part of it is not enforced.",
	}, []string{"kind", "policy", "reason"}),
		floorWeakened: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "holdfast_pdb_floor_weakened",
			Help: "Selected workloads of a generating DisruptionPolicy whose pods another PodDisruptionBudget covers with a weaker budget than the policy's: while holdfast is down, that PDB is their only floor.",
		}, []string{"policy"}),
		fights: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "holdfast_rollout_writers_fighting",
			Help: "Selected workloads of a RolloutPolicy whose templates two writers (field managers) alternate within its revertWindow (its WritersFighting condition names one).",
		}, []string{"policy"})}
	for _, c := range []prometheus.Collector{m.notReady, m.floorWeakened, m.fights} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// weakened records how many of a policy's workloads have a weaker PDB as their floor.
func (m *PolicyMetrics) weakened(name string, n int32) {
	if m == nil {
		return
	}
	m.floorWeakened.WithLabelValues(name).Set(float64(n))
}

// fighting records how many of a RolloutPolicy's workloads have two writers alternating
// their templates.
func (m *PolicyMetrics) fighting(name string, n int) {
	if m == nil {
		return
	}
	m.fights.WithLabelValues(name).Set(float64(n))
}

// forgetFights drops a deleted RolloutPolicy's count of fighting workloads.
func (m *PolicyMetrics) forgetFights(name string) {
	if m == nil {
		return
	}
	m.fights.DeleteLabelValues(name)
}

// ready records a policy's Ready condition; a nil m records nothing.
func (m *PolicyMetrics) ready(kind, name string, c metav1.Condition) {
	if m == nil {
		return
	}
	m.forget(kind, name)
	if c.Status != metav1.ConditionTrue {
		m.notReady.WithLabelValues(kind, name, c.Reason).Set(1)
	}
}

// forget drops a deleted policy.
func (m *PolicyMetrics) forget(kind, name string) {
	if m == nil {
		return
	}
	m.notReady.DeletePartialMatch(prometheus.Labels{"kind": kind, "policy": name})
	if kind == "DisruptionPolicy" {
		m.floorWeakened.DeleteLabelValues(name)
	}

}
