package eviction

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// zonal is a group of six pods created an hour ago, two per zone (a, b, c): p0 p1 in a,
// p2 p3 in b, p4 p5 in c.
func zonal(kind v1alpha1.WorkloadKind) *workload.Group {
	g := group(kind, 6)
	for i := range g.Pods {
		g.Pods[i].Created = now.Add(-time.Hour)
		g.Pods[i].Node = fmt.Sprintf("node-%c-%d", 'a'+i/2, i%2)
	}
	return g
}

func zoneOf(i int) map[string]string { return map[string]string{zoneKey: string(rune('a' + i/2))} }

// zoned is the policy under test: a budget of three pods, so that only the topology budget
// holds, and one zone at a time.
func zoned(mut func(*v1alpha1.DisruptionPolicySpec)) v1alpha1.DisruptionPolicy {
	return dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.MaxUnavailable = ptr.To(intstr.FromInt32(3))
		s.TopologyBudget = &v1alpha1.TopologyBudget{Key: zoneKey, MaxDisruptedDomains: 1}
		if mut != nil {
			mut(s)
		}
	})
}

// gone removes pod i from the group and returns its record, admitted ago.
func gone(g *workload.Group, i int, ago time.Duration) budget.Eviction {
	p := g.Pods[i]
	g.Pods = slices.DeleteFunc(g.Pods, func(q workload.Pod) bool { return q.UID == p.UID })
	return budget.Eviction{Pod: p.Name, UID: p.UID, At: now.Add(-ago), By: "self", Domains: zoneOf(i)}
}

// replacement adds a pod created at created, Ready since ready ago.
func replacement(g *workload.Group, name string, created, ready time.Duration) {
	g.Pods = append(g.Pods, workload.Pod{Name: name, UID: types.UID(name), Phase: "Running", Ready: true,
		ReadySince: now.Add(-ready), Created: now.Add(-created)})
}

// TestDecideTopologyBudget drives Decide, the real decision, through the topology budget.
// Every held case fails without it; every allowed one fails if it holds too much.
func TestDecideTopologyBudget(t *testing.T) {
	cases := map[string]struct {
		policy  v1alpha1.DisruptionPolicy
		kind    v1alpha1.WorkloadKind
		setup   func(g *workload.Group) []budget.Eviction
		pod     string // name of the pod evicted; its domain is domains
		domains map[string]string
		delete  bool
		held    bool
		wait    time.Duration // checked when set
		says    []string      // the message names these
	}{
		"a zone with a pod taken down and not replaced holds the other zones": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, 10*time.Second)} },
			pod:   "p2", domains: zoneOf(2), held: true, wait: 10*time.Minute - 10*time.Second,
			says: []string{"agents", "a (frees by", "zone", "replacementTimeout"}},
		"without a topology budget the same eviction goes": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.TopologyBudget = nil }),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, 10*time.Second)} },
			pod:   "p2", domains: zoneOf(2)},
		"the zone in flight goes on": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, 10*time.Second)} },
			pod:   "p1", domains: zoneOf(1)},
		"a guarded delete is held as its eviction": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.GuardDeletes = true }),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, 10*time.Second)} },
			pod:   "p2", domains: zoneOf(2), delete: true, held: true},
		"an admitted eviction the informer has not seen yet disrupts its zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				return []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Second), By: "self", Domains: zoneOf(0)}}
			},
			pod: "p2", domains: zoneOf(2), held: true},
		"an admitted eviction kube refused disrupts nothing once it lapses": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				return []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-budget.EvictionLapse), By: "self", Domains: zoneOf(0)}}
			},
			pod: "p2", domains: zoneOf(2)},
		"a terminating pod whose group is not whole disrupts its zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Pods[0].Terminating = true
				return []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Minute), By: "self", Domains: zoneOf(0)}}
			},
			pod: "p2", domains: zoneOf(2), held: true},
		"an available replacement frees the zone, wherever it runs": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 20*time.Second)
				replacement(g, "p6", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2)},
		"a replacement that has not settled for minReadySeconds does not": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.MinReadySeconds = 30 }),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 20*time.Second)
				replacement(g, "p6", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true},
		"a pod that was there before the eviction is no replacement": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Meta.Expected = 7 // one pod short besides: the group is not whole
				return []budget.Eviction{gone(g, 0, 20*time.Second)}
			},
			pod: "p2", domains: zoneOf(2), held: true},
		"one replacement frees one zone, not two": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.TopologyBudget.MaxDisruptedDomains = 2 }),
			setup: func(g *workload.Group) []budget.Eviction {
				ra, rb := gone(g, 0, 40*time.Second), gone(g, 2, 30*time.Second)
				replacement(g, "p6", 20*time.Second, 5*time.Second)
				return []budget.Eviction{ra, rb}
			},
			pod: "p4", domains: zoneOf(4)},
		"two zones disrupted hold a third under a budget of two": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.TopologyBudget.MaxDisruptedDomains = 2 }),
			setup: func(g *workload.Group) []budget.Eviction {
				return []budget.Eviction{gone(g, 0, 40*time.Second), gone(g, 2, 30*time.Second)}
			},
			pod: "p4", domains: zoneOf(4), held: true, says: []string{"a (frees by", "b (frees by"}},
		"a NotReady pod in another zone that holdfast did not take down holds no drain": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Pods[4].Ready = false // its node in zone c went NotReady
				return nil
			},
			pod: "p2", domains: zoneOf(2)},
		"after replacementTimeout a disruption holds its zone no longer": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) {
			s.TopologyBudget.ReplacementTimeout = &metav1.Duration{Duration: time.Minute}
		}),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, time.Minute)} },
			pod:   "p2", domains: zoneOf(2)},
		"another replica's record holds its zone for the clock margin longer": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) {
			s.TopologyBudget.ReplacementTimeout = &metav1.Duration{Duration: time.Minute}
		}),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, time.Minute)
				r.By = "other"
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true, wait: budget.MaxClockSkew},
		"a pod on a node without the key is not zone-limited": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, 10*time.Second)} },
			pod:   "p2"},
		"a record without domains (a previous release's) disrupts no zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 10*time.Second)
				r.Domains = nil
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2)},
		"a pod that is not Ready goes from any zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Pods[2].Ready = false
				return []budget.Eviction{gone(g, 0, 10*time.Second)}
			},
			pod: "p2", domains: zoneOf(2)},
		"a key of another policy's is not this one's": {policy: zoned(func(s *v1alpha1.DisruptionPolicySpec) { s.TopologyBudget.Key = "example.com/rack" }),
			setup: func(g *workload.Group) []budget.Eviction { return []budget.Eviction{gone(g, 0, 10*time.Second)} },
			pod:   "p2", domains: zoneOf(2)},
		// A DaemonSet's agent evicted from a cordoned node comes back on it: the new agent,
		// once available, is the replacement, and the zone frees.
		"a DaemonSet agent back on its cordoned node frees the zone": {policy: zoned(nil), kind: v1alpha1.KindDaemonSet,
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 20*time.Second)
				replacement(g, "agent-back", 18*time.Second, 2*time.Second)
				g.Pods[len(g.Pods)-1].Node = "node-a-0"
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2)},
		"a DaemonSet agent back but not Ready yet does not": {policy: zoned(nil), kind: v1alpha1.KindDaemonSet,
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 20*time.Second)
				replacement(g, "agent-back", 18*time.Second, 0)
				g.Pods[len(g.Pods)-1].Ready = false
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kind := tc.kind
			if kind == "" {
				kind = v1alpha1.KindDeployment
			}
			g := zonal(kind)
			records := tc.setup(g)
			i := slices.IndexFunc(g.Pods, func(p workload.Pod) bool { return p.Name == tc.pod })
			if i < 0 {
				t.Fatalf("no pod %s", tc.pod)
			}
			in := Input{Pod: g.Pods[i], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: records,
				Policies: []v1alpha1.DisruptionPolicy{tc.policy}, User: authenticationv1.UserInfo{Username: "admin"},
				Identity: "self", Now: now, Domains: tc.domains, Delete: tc.delete}
			d := Decide(in)
			var rules []string
			for _, v := range d.Violations {
				rules = append(rules, v.Rule)
			}
			if held := d.Action() == decision.Deny; held != tc.held {
				t.Fatalf("held %v (%v: %s), want %v", held, rules, d.Denial(), tc.held)
			}
			if !tc.held {
				return
			}
			if !slices.Equal(rules, []string{RuleTopologyBudget}) || d.Never() {
				t.Errorf("violations %v (never %v), want only a deferral by %s", rules, d.Never(), RuleTopologyBudget)
			}
			if tc.wait != 0 && d.Wait() != tc.wait {
				t.Errorf("wait %s, want %s", d.Wait(), tc.wait)
			}
			for _, s := range tc.says {
				if !strings.Contains(d.Denial(), s) {
					t.Errorf("message %q does not name %q", d.Denial(), s)
				}
			}
		})
	}
}
