package eviction

import (
	"net/http"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// replacedConfig is a StatefulSet server of four pods on four nodes in two zones (server-0
// and server-2 on zone 0's nodes), under a budget of two and a topologyBudget of one zone,
// nothing else in the policy; replica 1's cache lags 2.9s.
func replacedConfig() modelConfig {
	cfg := configFor(0)
	cfg.Kind, cfg.Replicas, cfg.Nodes, cfg.Budget = v1alpha1.KindStatefulSet, 4, 4, intstr.FromInt32(2)
	cfg.Cooldown, cfg.MinReady, cfg.Unhealthy = 0, 0, policyv1.AlwaysAllow
	cfg.Offsets, cfg.Lags = [2]time.Duration{}, [2]time.Duration{0, 2900 * time.Millisecond}
	cfg.Mode, cfg.Requesters, cfg.Permanent, cfg.Temporary, cfg.Windows, cfg.MaxHold = v1alpha1.ModeEnforce, nil, -1, nil, nil, 0
	cfg.DaemonSetZero, cfg.Shared, cfg.Zones, cfg.MaxZones, cfg.PDB = false, false, 2, 1, nil
	return cfg
}

// podNamed is the live pod of the name, nil when none.
func (w *world) podNamed(name string) *mpod {
	for _, p := range w.pods {
		if p.name == name && !p.terminating {
			return p
		}
	}
	return nil
}

// TestEvictionModelReplacedPodInAnotherZone drives the model through what its random
// sequences seldom bring together: server-0 (zone 0) evicted; server-2 (zone 0) then
// force-deleted and re-created by its StatefulSet under its name on a node of zone 1,
// Ready within a second; the drain retries server-2 through replica 1, whose cache still
// shows the old server-2 in zone 0 and everything Ready. Judged on the cache, the
// eviction is in the zone already down; kube evicts the new server-2, in zone 1: two zones
// down under a topologyBudget of one (E14). The guard holds it.
// The same with the old server-2 going (deleted by someone holdfast does not guard, still
// Ready in its grace period) when replica 1's cache last saw it: a pod going is kube's to
// evict, but kube evicts the pod of the name.
func TestEvictionModelReplacedPodInAnotherZone(t *testing.T) {
	for _, going := range []bool{false, true} {
		elsewhere := 0
		for draw := range 16 {
			w := newWorld(replacedConfig(), nil)
			server0, server2 := w.podNamed("server-0"), w.podNamed("server-2")
			if server0 == nil || server2 == nil || w.zoneOf(server0.node) != w.zoneOf(server2.node) {
				t.Fatalf("the scene: server-0 and server-2 are not in one zone")
			}
			if code := w.evict(0, server0, false, identityOf("kubectl")); code != http.StatusOK {
				t.Fatalf("server-0's eviction: %d, want admitted", code)
			}
			if going {
				server2.terminating, server2.goneAt = true, w.now.Add(grace)
				w.sync(1)
			}
			for range draw { // the replacement's node is drawn: vary the draw
				w.rng.IntN(2)
			}
			r := w.replace(server2, 800*time.Millisecond)
			if w.zoneOf(r.node) == w.zoneOf(server2.node) {
				continue
			}
			elsewhere++
			w.advance(1400 * time.Millisecond) // the replacement Ready; replica 1's cache is older
			if code := w.evict(1, r, false, identityOf("kubectl")); code == http.StatusOK {
				t.Errorf("going %v, draw %d: the new server-2, in %s, evicted while %s is down", going, draw, w.zoneOf(r.node), w.zoneOf(server0.node))
			}
			if len(w.violations) > 0 {
				t.Errorf("going %v, draw %d: %s", going, draw, strings.Join(w.violations, "\n"))
			}
		}
		if elsewhere == 0 {
			t.Fatalf("going %v: no draw put the new server-2 in another zone", going)
		}
	}
}
