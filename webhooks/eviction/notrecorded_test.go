package eviction

import (
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// TestNotRecordedRecordsAreDomainsOfTheirOwn: the budget's key changed mid-drain under
// maxDisruptedDomains 2 (or the budget was added then). Two pods were admitted down
// before it, p0 in zone a and p2 in zone b; neither record has the key, neither pod is
// still there. Each is down in some zone nobody read: two domains, possibly a and b. Both
// records named the one domain budget.NotRecorded, so they counted as one disrupted
// domain, and the eviction of p4 in zone c was admitted: three zones down under a budget
// of two. Each is now a domain of its own.
func TestNotRecordedRecordsAreDomainsOfTheirOwn(t *testing.T) {
	g := zonal(v1alpha1.KindDeployment)
	ra, rb := gone(g, 0, 40*time.Second), gone(g, 2, 30*time.Second) // p0 in a, then p2 in b (index 2 is p3 after p0 left)
	for _, r := range []*budget.Eviction{&ra, &rb} {
		r.Domains = map[string]string{"example.com/old-zone": r.Domains[zoneKey]} // the key the policy had then
		r.Serving = nil
	}
	p := zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.TopologyBudget.MaxDisruptedDomains = 2 })
	var pod int
	for i := range g.Pods {
		if g.Pods[i].Name == "p4" {
			pod = i
		}
	}
	in := Input{Pod: g.Pods[pod], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: []budget.Eviction{ra, rb},
		Policies: []v1alpha1.DisruptionPolicy{p}, User: authenticationv1.UserInfo{Username: "admin"},
		Identity: "self", Now: now, Domains: zoneOf(4), NodeDomains: nodeZones(g)}
	if d := Decide(in); d.Action() != decision.Deny {
		t.Errorf("the eviction of %s in zone c is admitted with two pods down in zones not recorded (two domains, limit 2): %v",
			g.Pods[pod].Name, budget.Disrupted(in.Records, DisruptionView(g.Pods, 0, now, zoneKey, in.NodeDomains), g.Expected, zoneKey, 10*time.Minute, now, "self"))
	}
}
