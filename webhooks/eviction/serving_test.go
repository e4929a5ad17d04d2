package eviction

import (
	"testing"
	"time"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestServingCountsNothingOnANodeCacheMiss: readDomains falls back to the API server for
// the evicted pod's node, readNodeDomains reads the cache only: when that node is not in
// the cache yet, the other pods of the group on it would be counted in no domain, the
// record's count would be too low, and the domain would free before the evicted pod is
// replaced. No count is recorded then, and the domain stays disrupted.
func TestServingCountsNothingOnANodeCacheMiss(t *testing.T) {
	const key = "topology.kubernetes.io/zone"
	g := group(v1alpha1.KindDeployment, 4)
	g.Pods[0].Node, g.Pods[1].Node, g.Pods[2].Node, g.Pods[3].Node = "n1", "n1", "n2", "n3"
	in := Input{Pod: g.Pods[0], Group: g, Now: now, Domains: map[string]string{key: "A"},
		// n1 (the evicted pod's node) missing from the node cache: read as no domain.
		NodeDomains: map[string]map[string]string{"n1": nil, "n2": {key: "A"}, "n3": {key: "B"}}}
	serving := Serving(in)
	t.Logf("Serving recorded: %v (zone A really has 3: p0, p1, p2)", serving)
	rec := budget.Eviction{Pod: "p0", UID: "u0", At: now, Domains: map[string]string{key: "A"}, Serving: serving}
	// 30s later: p0 gone, its replacement pending; one pod of zone B crashed (not whole).
	later := now.Add(30 * time.Second)
	pods := []workload.Pod{g.Pods[1], g.Pods[2], g.Pods[3]}
	pods[2].Ready = false
	nodes := map[string]map[string]string{"n1": {key: "A"}, "n2": {key: "A"}, "n3": {key: "B"}}
	view := DisruptionView(pods, 0, later, key, nodes)
	d := budget.Disrupted([]budget.Eviction{rec}, view, 4, key, 10*time.Minute, later, "")
	if _, ok := d["A"]; !ok {
		t.Errorf("zone A freed at once (disrupted %v) though p0 is not replaced: Serving undercounted on a node-cache miss", d)
	}
}
