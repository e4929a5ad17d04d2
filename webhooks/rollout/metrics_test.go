package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestMetricsCountRequests decides requests with Decide and counts them: a request counts
// once in holdfast_rollout_requests_total, and once in holdfast_rollout_reviews_total
// under each policy that selected the workload, with
// the outcome that policy gave; its findings count one by one in
// holdfast_rollout_findings_total; the deprecated holdfast_rollout_decisions_total counts
// as it did.
func TestMetricsCountRequests(t *testing.T) {
	serverCount := utiltesting.MakeRolloutPolicy("konnectivity").ArgMatchesReplicas("konnectivity-server", "--server-count").
		Selector(map[string]string{"component": "control-plane"})
	audit := utiltesting.MakeRolloutPolicy("audit").ArgMatchesReplicas("konnectivity-server", "--server-count").Mode(v1alpha1.ModeAudit)
	const kind = "kind=Deployment"

	for name, tc := range map[string]struct {
		old, obj   *appsv1.Deployment
		policies   []*v1alpha1.RolloutPolicy
		requests   map[string]float64
		reviews    map[string]float64
		findings   map[string]float64
		deprecated map[string]float64
	}{
		// A scale without the flag, and a relabel out of the policy: two findings, one request.
		"two findings of one policy count one request": {
			old: konnectivity(3, "3").Obj(), obj: konnectivity(5, "3").Label("component", "moved").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			requests: map[string]float64{kind + ",outcome=denied": 1},
			reviews:  map[string]float64{kind + ",outcome=denied,policy=konnectivity": 1},
			findings: map[string]float64{"action=deny," + kind + ",policy=konnectivity,rule=argsMatchReplicas": 1,
				"action=deny," + kind + ",policy=konnectivity,rule=selection": 1},
			deprecated: map[string]float64{"action=deny," + kind + ",policy=konnectivity,rule=argsMatchReplicas": 1,
				"action=deny," + kind + ",policy=konnectivity,rule=selection": 1}},
		"each policy counts the request with its own outcome": {
			old: konnectivity(3, "3").Obj(), obj: konnectivity(5, "3").Obj(),
			policies: []*v1alpha1.RolloutPolicy{audit.Clone().Obj(), serverCount.Clone().Obj()},
			requests: map[string]float64{kind + ",outcome=denied": 1},
			reviews:  map[string]float64{kind + ",outcome=audited,policy=audit": 1, kind + ",outcome=denied,policy=konnectivity": 1},
			findings: map[string]float64{"action=audit," + kind + ",policy=audit,rule=argsMatchReplicas": 1,
				"action=deny," + kind + ",policy=konnectivity,rule=argsMatchReplicas": 1},
			deprecated: map[string]float64{"action=audit," + kind + ",policy=audit,rule=argsMatchReplicas": 1,
				"action=deny," + kind + ",policy=konnectivity,rule=argsMatchReplicas": 1}},
		"an admitted request carries its policy": {
			old: konnectivity(3, "3").Obj(), obj: konnectivity(5, "5").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj(), serverCount.Clone().Suspend().Obj()},
			requests: map[string]float64{kind + ",outcome=allowed": 1},
			reviews:  map[string]float64{kind + ",outcome=allowed,policy=konnectivity": 1},
			findings: map[string]float64{},
			// The previous release's form: admitted requests without a policy.
			deprecated: map[string]float64{"action=allow," + kind + ",policy=,rule=": 1}},
		"a request no policy selects": {
			old: konnectivity(3, "3").Obj(), obj: konnectivity(5, "1").Obj(),
			policies:   []*v1alpha1.RolloutPolicy{serverCount.Clone().Kinds(v1alpha1.KindStatefulSet).Obj()},
			requests:   map[string]float64{kind + ",outcome=unguarded": 1},
			reviews:    map[string]float64{},
			findings:   map[string]float64{},
			deprecated: map[string]float64{"action=allow," + kind + ",policy=,rule=": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Operation: admissionv1.Update, Old: mustWorkload(t, tc.old), New: mustWorkload(t, tc.obj)}
			for _, p := range tc.policies {
				in.Policies = append(in.Policies, *p)
			}
			m.observe(in.New.Kind, decide(t, in), time.Millisecond)
			for metric, want := range map[string]map[string]float64{"holdfast_rollout_requests_total": tc.requests, "holdfast_rollout_reviews_total": tc.reviews,
				"holdfast_rollout_findings_total": tc.findings, "holdfast_rollout_decisions_total": tc.deprecated} {
				if diff := cmp.Diff(want, utiltesting.Counts(t, reg, metric)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", metric, diff)
				}
			}
		})
	}
}
