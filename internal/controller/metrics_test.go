package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// TestInvalidWindowIsReportedNotHeld: a window stored while the policy webhook was down
// that never opens makes the policy not Ready, naming the field, and is reported on the
// holdfast_policy_not_ready gauge (the HoldfastPolicyNotInForce alert) until it is fixed
// or the policy is deleted; the valid windows beside it still show in the status.
func TestInvalidWindowIsReportedNotHeld(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	windows := []v1alpha1.Window{
		{Schedule: "@every 2h", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowAllow},
		{Name: "freeze", Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny},
	}
	ready := inForce(3)
	st, next := windowStatus(windows, v1alpha1.Exemptions{}, now, &ready)
	if ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonInvalidWindow ||
		!strings.Contains(ready.Message, "spec.windows[0].schedule") || !strings.Contains(ready.Message, "ignore") {
		t.Errorf("Ready = %+v, want False InvalidWindow naming spec.windows[0].schedule and saying it is ignored", ready)
	}
	if st.ActiveWindow != "freeze" || !next.Equal(now.Add(time.Hour)) {
		t.Errorf("window status %+v next %s: want the valid freeze window active until 11:00", st, next)
	}

	reg := prometheus.NewRegistry()
	m, err := NewPolicyMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	series := func() []string {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range families {
			for _, s := range f.GetMetric() {
				var labels []string
				for _, l := range s.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				out = append(out, fmt.Sprintf("%s{%s} %v", f.GetName(), strings.Join(labels, ","), s.GetGauge().GetValue()))
			}
		}
		return out
	}
	m.ready("RolloutPolicy", "p", ready)
	if got, want := series(), []string{"holdfast_policy_not_ready{kind=RolloutPolicy,policy=p,reason=InvalidWindow} 1"}; !slices.Equal(got, want) {
		t.Errorf("series = %v, want %v", got, want)
	}
	m.ready("RolloutPolicy", "p", inForce(4))
	if got := series(); len(got) != 0 {
		t.Errorf("a fixed policy leaves %v", got)
	}
	m.ready("DisruptionPolicy", "q", ready)
	m.forget("DisruptionPolicy", "q")
	if got := series(); len(got) != 0 {
		t.Errorf("a deleted policy leaves %v", got)
	}
	var none *PolicyMetrics
	none.ready("RolloutPolicy", "p", ready) // nil records nothing, without a panic
}
