package eviction

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestEmptyZoneIsNoDomain: a node whose topology label is present but empty is in no
// domain, as a node without the label is, on every path: the evicted pod's own domain
// (readDomains), its group's nodes (readNodeDomains, DisruptionView), and records an
// earlier release wrote with the empty value. Before, the evicted pod's empty value made
// "" a domain of its own, held while another zone was disrupted, and its record disrupted
// "", a domain every pod on a node without the label was counted in.
func TestEmptyZoneIsNoDomain(t *testing.T) {
	g := zonal(v1alpha1.KindDaemonSet)
	g.Pods[0].Node = "node-unzoned"
	nodes := []client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-unzoned", Labels: map[string]string{zoneKey: ""}}}}
	for _, p := range g.Pods[1:] {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.Node, Labels: map[string]string{zoneKey: p.Node[5:6]}}})
	}
	h := &Handler{Reader: utiltesting.NewMemReader(nil, nodes...)}
	policy := zoned(nil)
	in := Input{Pod: g.Pods[0], Group: g, Now: now, Policies: []v1alpha1.DisruptionPolicy{policy}}
	if err := h.readDomains(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
	if v, ok := in.Domains[zoneKey]; ok {
		t.Errorf("a node with %s empty puts the pod in domain %q, want none", zoneKey, v)
	}
	// Its record says the key was read and found no domain, which disrupts none; a key
	// missing from a record would be one not read (budget.NotRecorded).
	if got := recordedDomains(in); len(got) != 1 || got[zoneKey] != "" {
		t.Errorf("the record keeps domains %v, want %s read as none", got, zoneKey)
	} else if _, ok := got[zoneKey]; !ok {
		t.Errorf("the record keeps domains %v without %s", got, zoneKey)
	}
	// Zone b disrupted, one zone allowed: the pod in no domain is not limited.
	in.Records = []budget.Eviction{gone(g, 2, 10*time.Second)}
	in.Pod = g.Pods[0]
	if v, held := topologyHold(in, &policy.Spec); held {
		t.Errorf("a pod in no domain is held by the topology budget: %s", v.Message)
	}

	// Another pod's node read for the group: the empty value is no domain either.
	in.Pod, in.Domains = g.Pods[1], zoneOf(1)
	if err := h.readNodeDomains(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
	if v, ok := in.NodeDomains["node-unzoned"][zoneKey]; ok {
		t.Errorf("readNodeDomains reads node-unzoned in domain %q, want none", v)
	}

	// A record an earlier release wrote with the empty value disrupts no domain.
	old := budget.Eviction{Pod: "p0", UID: "u0", At: now.Add(-10 * time.Second), By: "self", Domains: map[string]string{zoneKey: ""}}
	view := DisruptionView(g.Pods[1:], 0, now, zoneKey, nodeZones(g))
	if d := budget.Disrupted([]budget.Eviction{old}, view, 6, zoneKey, 10*time.Minute, now, "self"); len(d) != 0 {
		t.Errorf("a record in the empty value disrupts %v, want nothing", d)
	}
}
