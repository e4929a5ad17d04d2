package eviction

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestMetricsCountRequests decides evictions with Decide and counts them: a request counts
// once in holdfast_eviction_requests_total, and once in holdfast_eviction_reviews_total
// under each policy that applied, with the outcome
// that policy gave and never with an empty policy when one applied; its findings count one
// by one in holdfast_eviction_findings_total; the deprecated holdfast_evictions_total counts
// as it did.
func TestMetricsCountRequests(t *testing.T) {
	// strict finds two things wrong with evicting p1: p0 is not Ready (maxUnavailable) and
	// an eviction was admitted 5 s ago (cooldown). lenient finds nothing.
	strict := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: 20 * time.Second} })
	strict.Name = "strict"
	lenient := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(3)) })
	lenient.Name = "lenient"
	suspended := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Suspend = true })
	suspended.Name = "suspended"
	warn := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Mode = v1alpha1.ModeWarn; s.Cooldown = strict.Spec.Cooldown })
	warn.Name = "warn"

	for name, tc := range map[string]struct {
		policies   []v1alpha1.DisruptionPolicy
		unguarded  bool // the pod's owner is not guarded (no group)
		requests   map[string]float64
		reviews    map[string]float64
		findings   map[string]float64
		deprecated map[string]float64
	}{
		"two findings of one policy count one request": {policies: []v1alpha1.DisruptionPolicy{strict},
			requests: map[string]float64{"outcome=deferred": 1},
			reviews:  map[string]float64{"outcome=deferred,policy=strict": 1},
			findings: map[string]float64{"outcome=deferred,policy=strict,rule=cooldown": 1,
				"outcome=deferred,policy=strict,rule=maxUnavailable": 1},
			deprecated: map[string]float64{"outcome=deferred,policy=strict,rule=cooldown": 1,
				"outcome=deferred,policy=strict,rule=maxUnavailable": 1}},
		// The request is deferred; the policy that found nothing says so under its own name.
		"a policy that finds nothing counts allowed under its name": {policies: []v1alpha1.DisruptionPolicy{strict, lenient},
			requests: map[string]float64{"outcome=deferred": 1},
			reviews:  map[string]float64{"outcome=deferred,policy=strict": 1, "outcome=allowed,policy=lenient": 1},
			findings: map[string]float64{"outcome=deferred,policy=strict,rule=cooldown": 1,
				"outcome=deferred,policy=strict,rule=maxUnavailable": 1},
			deprecated: map[string]float64{"outcome=deferred,policy=strict,rule=cooldown": 1,
				"outcome=deferred,policy=strict,rule=maxUnavailable": 1}},
		"an admitted eviction carries its policy": {policies: []v1alpha1.DisruptionPolicy{lenient, suspended},
			requests: map[string]float64{"outcome=allowed": 1},
			reviews:  map[string]float64{"outcome=allowed,policy=lenient": 1},
			findings: map[string]float64{},
			// The previous release's form: admitted evictions without a policy.
			deprecated: map[string]float64{"outcome=allowed,policy=,rule=": 1}},
		"a warning policy's two findings count one warned request": {policies: []v1alpha1.DisruptionPolicy{warn},
			requests: map[string]float64{"outcome=warned": 1},
			reviews:  map[string]float64{"outcome=warned,policy=warn": 1},
			findings: map[string]float64{"outcome=warned,policy=warn,rule=cooldown": 1,
				"outcome=warned,policy=warn,rule=maxUnavailable": 1},
			deprecated: map[string]float64{"outcome=warned,policy=warn,rule=cooldown": 1,
				"outcome=warned,policy=warn,rule=maxUnavailable": 1}},
		"an owner holdfast does not guard": {policies: []v1alpha1.DisruptionPolicy{strict}, unguarded: true,
			requests:   map[string]float64{"outcome=unguarded": 1},
			reviews:    map[string]float64{},
			findings:   map[string]float64{},
			deprecated: map[string]float64{"outcome=unguarded,policy=,rule=": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			g := group("DaemonSet", 6)
			g.Pods[0].Ready = false
			in := Input{Group: g, Pod: g.Pods[1], PodLabels: map[string]string{"app": "agent"}, Now: now, Identity: "self",
				Policies: tc.policies, Records: []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-5 * time.Second), By: "self"}}}
			if tc.unguarded {
				in.Group = nil
			}
			m.observe(Decide(in), in, time.Millisecond)
			for metric, want := range map[string]map[string]float64{"holdfast_eviction_requests_total": tc.requests, "holdfast_eviction_reviews_total": tc.reviews,
				"holdfast_eviction_findings_total": tc.findings, "holdfast_evictions_total": tc.deprecated} {
				if diff := cmp.Diff(want, utiltesting.Counts(t, reg, metric)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", metric, diff)
				}
			}
		})
	}
}

// TestPolicyOutcome: a policy's outcome is its most severe finding's, never another
// policy's.
func TestPolicyOutcome(t *testing.T) {
	deferA := decision.Violation{Policy: "a", Rule: RuleCooldown, Action: decision.Deny}
	refuseA := decision.Violation{Policy: "a", Rule: RuleMaxUnavailable, Action: decision.Deny, Never: true}
	refuseB := decision.Violation{Policy: "b", Rule: RuleMaxUnavailable, Action: decision.Deny, Never: true}
	releaseA := decision.Violation{Policy: "a", Rule: RuleMaxHold, Action: decision.Audit}
	warnA := decision.Violation{Policy: "a", Rule: RuleCooldown, Action: decision.Warn}
	for _, tc := range []struct {
		vs   decision.Violations
		want string
	}{
		{nil, "allowed"},
		{decision.Violations{refuseB}, "allowed"},
		{decision.Violations{deferA, refuseB}, "deferred"},
		{decision.Violations{deferA, refuseA}, "denied"},
		{decision.Violations{releaseA}, "released"},
		{decision.Violations{warnA, warnA}, "warned"},
	} {
		if got := policyOutcome(tc.vs, "a"); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.vs, got, tc.want)
		}
	}
}
