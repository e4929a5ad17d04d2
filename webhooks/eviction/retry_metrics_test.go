package eviction

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// TestHoldfastsOwnRetryIsCountedDeferred: holdfast's own 429 (retryLater: a ledger not
// reachable in time, two PodDisruptionBudgets over the pod) is a deferral of a guarded pod
// in holdfast_eviction_requests_total, not "unguarded".
func TestHoldfastsOwnRetryIsCountedDeferred(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := group(v1alpha1.KindDaemonSet, 2)
	d := retryLater("PodDisruptionBudgets a, b both cover pod x")
	if d.Action() != decision.Deny {
		t.Fatal("retryLater does not defer")
	}
	m.observe(d, Input{Group: g, Pod: g.Pods[0]}, time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var unguarded, deferred float64
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			var labels []string
			for _, l := range mm.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if mm.GetCounter() != nil && mm.GetCounter().GetValue() > 0 {
				t.Logf("%s%v %v", mf.GetName(), labels, mm.GetCounter().GetValue())
			}
			if mf.GetName() == "holdfast_eviction_requests_total" && len(labels) == 1 && labels[0] == "outcome=unguarded" {
				unguarded = mm.GetCounter().GetValue()
			}
			if mf.GetName() == "holdfast_eviction_requests_total" && len(labels) == 1 && labels[0] == "outcome=deferred" {
				deferred = mm.GetCounter().GetValue()
			}
		}
	}
	if unguarded != 0 || deferred != 1 {
		t.Errorf("a 429 holdfast answered is counted %v unguarded and %v deferred, want 0 and 1", unguarded, deferred)
	}
}
