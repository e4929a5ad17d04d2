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

// nodeZones are the zones of the nodes of the group's pods, as the handler reads them from
// the node cache: node-X-k is in zone X.
func nodeZones(g *workload.Group) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, p := range g.Pods {
		if strings.HasPrefix(p.Node, "node-") && len(p.Node) > 5 {
			out[p.Node] = map[string]string{zoneKey: p.Node[5:6]}
		}
	}
	return out
}

// gone removes pod i from the group and returns its record, admitted ago, as the handler
// writes it (Serving: the pods that served in its zone then, itself included).
func gone(g *workload.Group, i int, ago time.Duration) budget.Eviction {
	p := g.Pods[i]
	serving := Serving(Input{Pod: p, Group: g, Domains: zoneOf(i), NodeDomains: nodeZones(g)})
	g.Pods = slices.DeleteFunc(g.Pods, func(q workload.Pod) bool { return q.UID == p.UID })
	return budget.Eviction{Pod: p.Name, UID: p.UID, At: now.Add(-ago), By: "self", Domains: zoneOf(i), Serving: serving}
}

// replacementIn adds a pod created at created, Ready since ready ago, on node.
func replacementIn(g *workload.Group, name, node string, created, ready time.Duration) {
	replacement(g, name, created, ready)
	g.Pods[len(g.Pods)-1].Node = node
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
		"an available replacement in the zone frees it": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Meta.Expected = 7 // one pod short besides: only the zone's count frees it
				r := gone(g, 0, 20*time.Second)
				replacementIn(g, "p6", "node-a-2", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2)},
		"a replacement in another zone frees the zone once the group is whole": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 20*time.Second)
				replacementIn(g, "p6", "node-c-2", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2)},
		"a replacement in another zone does not free the zone while the group is not whole": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Meta.Expected = 7
				r := gone(g, 0, 20*time.Second)
				replacementIn(g, "p6", "node-c-2", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true},
		"a record without the count (a previous release's) is freed by a later replacement in its zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Meta.Expected = 7
				r := gone(g, 0, 20*time.Second)
				r.Serving = nil
				replacementIn(g, "p6", "node-a-2", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2)},
		"a record without the count is not freed by a replacement in another zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Meta.Expected = 7
				r := gone(g, 0, 20*time.Second)
				r.Serving = nil
				replacementIn(g, "p6", "node-b-2", 15*time.Second, 5*time.Second)
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true},
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
				ra, rb := gone(g, 0, 40*time.Second), gone(g, 2, 30*time.Second) // p0 in a, then p3 in b
				replacementIn(g, "p6", "node-a-2", 20*time.Second, 5*time.Second)
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
		// The key changed, or the budget was added, while a drain ran: a pod the record took
		// down is down in some zone all the same.
		"a record without the key (admitted before the budget or its key) disrupts a zone not recorded": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 10*time.Second)
				r.Domains = map[string]string{"example.com/rack": "r1"}
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true, says: []string{budget.NotRecorded}},
		"a record without domains at all disrupts a zone not recorded": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 10*time.Second)
				r.Domains = nil
				return []budget.Eviction{r}
			},
			pod: "p2", domains: zoneOf(2), held: true},
		"a record without the key whose pod still terminates is in its node's zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				g.Pods[0].Terminating = true
				return []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-10 * time.Second), By: "self"}}
			},
			pod: "p1", domains: zoneOf(1)},
		"a record that read the key on a node without it disrupts no zone": {policy: zoned(nil),
			setup: func(g *workload.Group) []budget.Eviction {
				r := gone(g, 0, 10*time.Second)
				r.Domains = map[string]string{zoneKey: ""}
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
				Identity: "self", Now: now, Domains: tc.domains, NodeDomains: nodeZones(g), Delete: tc.delete}
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

// TestUnrelatedReplacementFreesNoZone: a pod re-created for another reason (the
// replacement of a pod that holdfast never took down: a crash, a node-pressure eviction, a
// manual delete in zone c) does not free zone a, whose admitted eviction's replacement is
// not available: a zone is whole again when it has as many available pods as served there
// when the eviction was admitted. Counted per group, it let the drain into zone b: two
// zones down at once under maxDisruptedDomains 1.
func TestUnrelatedReplacementFreesNoZone(t *testing.T) {
	g := zonal(v1alpha1.KindDeployment)
	// 12:00-20s: holdfast admits the eviction of p0 (zone a); its replacement does not
	// become available (unschedulable, pulling, crash-looping).
	ra := gone(g, 0, 20*time.Second)
	// 12:00-15s: p4 (zone c) is deleted by someone else (not recorded: holdfast did not
	// take it down); the ReplicaSet re-creates it as p4r, available 5s ago.
	g.Pods[3].UID, g.Pods[3].Name = "u4-gone", "p4-gone" // index 3 is p4 after p0 left
	g.Pods = append(g.Pods[:3], g.Pods[4:]...)
	replacementIn(g, "p4r", "node-c-0", 15*time.Second, 5*time.Second)
	i := 1 // p2, zone b (p0 is gone: p1 p2 p3 p5 p4r)
	if g.Pods[i].Name != "p2" {
		t.Fatalf("pod %d is %s", i, g.Pods[i].Name)
	}
	in := Input{Pod: g.Pods[i], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: []budget.Eviction{ra},
		Policies: []v1alpha1.DisruptionPolicy{zoned(nil)}, User: authenticationv1.UserInfo{Username: "admin"},
		Identity: "self", Now: now, Domains: zoneOf(2), NodeDomains: nodeZones(g)}
	d := Decide(in)
	if d.Action() != decision.Deny {
		t.Fatalf("the eviction of p2 in zone b was admitted while zone a's admitted eviction (p0) has no available replacement "+
			"(p4r replaced a zone-c pod holdfast never took down): two zones down under maxDisruptedDomains 1; violations %v", d.Violations)
	}
}

// TestPromptReplacementSeenByEveryReplica: kube's ReplicaSet controller creates a
// replacement within a second of the eviction. While the group is not whole for another
// reason (one pod NotReady on a failing node in zone c), zone a frees once its available
// pods are back to the count its record keeps, on every replica alike: no clock is read.
// Matched by creation time, a record written by another replica counted only pods created
// MaxClockSkew (5s) after it, and this replica held zone b for the full replacementTimeout
// (10m) while the writer admitted at once.
func TestPromptReplacementSeenByEveryReplica(t *testing.T) {
	g := zonal(v1alpha1.KindDeployment)
	g.Pods[4].Ready = false // p4, zone c: its node failing; holdfast took nothing down there
	ra := gone(g, 0, time.Minute)
	ra.By = "replica-1"
	// The ReplicaSet controller's replacement, created 0.5s after the eviction, Ready 30s.
	replacementIn(g, "p0r", "node-a-2", time.Minute-500*time.Millisecond, 30*time.Second)
	i := 1 // p2, zone b
	in := Input{Pod: g.Pods[i], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: []budget.Eviction{ra},
		Policies: []v1alpha1.DisruptionPolicy{zoned(nil)}, User: authenticationv1.UserInfo{Username: "admin"},
		Identity: "replica-0", Now: now, Domains: zoneOf(2), NodeDomains: nodeZones(g)}
	if d := Decide(in); d.Action() == decision.Deny {
		t.Fatalf("zone a's eviction has an available replacement (created 0.5s after it), yet this replica holds zone b for %s: %s",
			d.Wait().Round(time.Second), d.Denial())
	}
	// The writer's own view admits it: the two replicas disagree for replacementTimeout.
	in.Records[0].By = "replica-0"
	if d := Decide(in); d.Action() == decision.Deny {
		t.Fatalf("the writing replica holds too: %s", d.Denial())
	}
}
