package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyMetrics say which policies are not in force and why: the status controllers set
// them with each policy's Ready condition, on the leader.
type PolicyMetrics struct {
	notReady *prometheus.GaugeVec
}

// NewPolicyMetrics registers the policies' metrics with reg.
func NewPolicyMetrics(reg prometheus.Registerer) (*PolicyMetrics, error) {
	m := &PolicyMetrics{notReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "holdfast_policy_not_ready",
		Help: "1 for each policy whose Ready condition is False, by reason (InvalidWindow, InvalidSelector, Suspended): part of it is not enforced.",
	}, []string{"kind", "policy", "reason"})}
	if err := reg.Register(m.notReady); err != nil {
		return nil, err
	}
	return m, nil
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
}
