package sim

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

func load(t *testing.T, paths ...string) *Scenario {
	t.Helper()
	sc, err := Load(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func run(t *testing.T, sc *Scenario) *Result {
	t.Helper()
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || res.TimedOut {
		t.Fatalf("errors %v, timed out %t", res.Errors, res.TimedOut)
	}
	return res
}

func shipped(name string) string {
	return filepath.Join("..", "..", "..", "..", "scenarios", name+".yaml")
}

// unguarded is the scenario without its policies: the baseline the guard is measured against.
func unguarded(sc *Scenario) *Scenario {
	out := *sc
	out.Objects = slices.DeleteFunc(slices.Clone(sc.Objects), func(o Object) bool {
		switch o.Object.(type) {
		case *v1alpha1.RolloutPolicy, *v1alpha1.DisruptionPolicy:
			return true
		}
		return false
	})
	return &out
}

func writeFile(tb testing.TB, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "scenario.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestOperatorStorm(t *testing.T) {
	sc := load(t, shipped("operator-storm"))
	off := run(t, unguarded(sc)).Workload("Deployment tenant-a/kube-apiserver")
	if off.Revisions != 4 || !off.Converged {
		t.Errorf("unguarded: want every generation rolled out (4 revisions) and convergence; got %+v", off)
	}
	res := run(t, sc)
	on := res.Workload("Deployment tenant-a/kube-apiserver")
	if on.Revisions != 2 || on.PeakRevisionsWithPods != 2 || !on.Converged || on.Refusals == 0 {
		t.Errorf("guarded: want 2 revisions, never more than 2 with pods, refusals and convergence to GEN4; got %+v", on)
	}
	if on.MaxUnavailable != 0 || on.PeakPods != 4 {
		t.Errorf("guarded: want no pod unavailable and at most 3+1 surge pods; got %+v", on)
	}
	var first *Entry
	for i := range res.Timeline {
		if res.Timeline[i].Answer != "admitted" && res.Timeline[i].Request == "UPDATE" {
			first = &res.Timeline[i]
			break
		}
	}
	if first == nil || first.At != 1.5 || !strings.Contains(first.Message, "[hosted-control-plane/minInterval]") {
		t.Errorf("want GEN2 at 1.5s refused by minInterval, as the webhook words it; got %+v", first)
	}
}

// The storm's file is the e2e storm: the same templates, replicas and pace.
func TestOperatorStormIsTheE2EStorm(t *testing.T) {
	sc := load(t, shipped("operator-storm"))
	if len(sc.Spec.Timeline) != 4 {
		t.Fatalf("want the four generations, have %d steps", len(sc.Spec.Timeline))
	}
	for i, st := range sc.Spec.Timeline {
		gen := i + 1
		if want := time.Duration(i) * 1500 * time.Millisecond; st.At.Duration != want {
			t.Errorf("GEN%d at %s, want %s", gen, st.At.Duration, want)
		}
		if !equality.Semantic.DeepEqual(*st.Apply.Template, harness.KamajiTemplate(gen)) {
			t.Errorf("GEN%d's template differs from harness.KamajiTemplate(%d)", gen, gen)
		}
	}
	if r := sc.Spec.Timeline[0].Apply.Replicas; r == nil || *r != harness.StormReplicas {
		t.Errorf("replicas %v, want %d", r, harness.StormReplicas)
	}
}

func TestAgentDrain(t *testing.T) {
	sc := load(t, shipped("agent-drain"))
	off := run(t, unguarded(sc))
	if w := off.Workloads[0]; w.MaxUnavailable != 4 {
		t.Errorf("unguarded: want all four agents down at once; got %+v", w)
	}
	res := run(t, sc)
	w, d := res.Workloads[0], res.Drains[0]
	if w.MaxUnavailable != 1 || w.Evictions != 4 || w.MinEvictionGapSeconds < 20 || d.Drained != 4 {
		t.Errorf("want one agent at a time, 20s apart, 4/4 drained; got %+v, %+v", w, d)
	}
	// Three gaps of the 20 s cooldown, and the last pod's 5 s grace period.
	if d.Seconds < 64 || d.Seconds > 66 {
		t.Errorf("drain took %gs, want about 65s", d.Seconds)
	}
	if d.Deferred == 0 || res.Requests.EvictionsDeferred != d.Deferred {
		t.Errorf("want deferrals counted; got %+v, %+v", d, res.Requests)
	}
}

func TestKiamNodeGroupSwap(t *testing.T) {
	sc := load(t, shipped("kiam-node-group-swap"))
	if w := run(t, unguarded(sc)).Workloads[0]; w.MinReady != 0 {
		t.Errorf("unguarded: want every server down at once; got %+v", w)
	}
	res := run(t, sc)
	if w := res.Workloads[0]; w.MinReady != 2 || w.MaxUnavailable != 1 || res.Drains[0].Drained != 3 {
		t.Errorf("want two servers Ready throughout and 3/3 drained; got %+v, %+v", w, res.Drains[0])
	}
}

func TestDeterministic(t *testing.T) {
	// The big scenario drains five nodes that finish at the same instant.
	big := writeFile(t, bigScenario(1000))
	for _, name := range []string{shipped("operator-storm"), shipped("agent-drain"), shipped("kiam-node-group-swap"), shipped("bounded-hold"), big} {
		a, b := run(t, load(t, name)), run(t, load(t, name))
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ", name)
		}
	}
}

// A StatefulSet under settle: the second change waits for the first to roll out, one
// ordinal at a time, and a DaemonSet drained with its pods (as cluster-autoscaler does)
// keeps to its budget.
func TestStatefulSetAndDaemonSet(t *testing.T) {
	sc := load(t, writeFile(t, `
apiVersion: holdfast.dev/v1alpha1
kind: Scenario
metadata: {name: kinds}
spec:
  nodes:
  - {prefix: cp, count: 3, labels: {pool: cp}}
  - {prefix: node, count: 4, labels: {pool: workers}}
  podStartup: 2s
  timeline:
  - at: 1s
    apply:
      workload: {kind: StatefulSet, namespace: cp, name: etcd}
      template: {metadata: {labels: {app: etcd}}, spec: {nodeSelector: {pool: cp}, containers: [{name: etcd, image: "etcd:2"}]}}
  - at: 2s
    apply:
      workload: {kind: StatefulSet, namespace: cp, name: etcd}
      template: {metadata: {labels: {app: etcd}}, spec: {nodeSelector: {pool: cp}, containers: [{name: etcd, image: "etcd:3"}]}}
  - at: 3s
    drain: {nodes: [node-0, node-1, node-2, node-3], daemonSets: true, retryAfter: 1s, clientRetries: 0}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: etcd, namespace: cp, labels: {app: etcd}}
spec:
  replicas: 3
  selector: {matchLabels: {app: etcd}}
  template: {metadata: {labels: {app: etcd}}, spec: {nodeSelector: {pool: cp}, containers: [{name: etcd, image: "etcd:1"}]}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: nodes}
spec:
  selector: {matchLabels: {app: agent}}
  template: {metadata: {labels: {app: agent}}, spec: {nodeSelector: {pool: workers}, containers: [{name: agent, image: "agent:1"}]}}
---
apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: etcd}
spec:
  mode: Enforce
  targets: {kinds: [StatefulSet]}
  rules: {settle: {}}
---
apiVersion: holdfast.dev/v1alpha1
kind: DisruptionPolicy
metadata: {name: agents}
spec:
  mode: Enforce
  targets: {selector: {matchLabels: {app: agent}}}
  maxUnavailable: 1
`))
	res := run(t, sc)
	etcd := res.Workload("StatefulSet cp/etcd")
	if etcd.Revisions != 3 || !etcd.Converged || etcd.Refusals == 0 || etcd.MaxUnavailable > 1 {
		t.Errorf("etcd: want etcd:3 admitted only after etcd:2 rolled out, one ordinal at a time; got %+v", etcd)
	}
	agent := res.Workload("DaemonSet nodes/agent")
	if agent.MaxUnavailable != 1 || agent.Evictions != 4 {
		t.Errorf("agent: want its four pods evicted one at a time; got %+v", agent)
	}
	if d := res.Drains[0]; d.Drained != 4 {
		t.Errorf("want 4/4 nodes drained; got %+v", d)
	}
}

func TestBadInput(t *testing.T) {
	const head = "apiVersion: holdfast.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec:\n  nodes: [{prefix: node, count: 1}]\n"
	for name, tc := range map[string]struct{ file, want string }{
		"not a scenario object": {head + "  timeline: []\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			"document 2: a ConfigMap: a scenario holds"},
		"no scenario":      {"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", "no Scenario document"},
		"two scenarios":    {head + "  timeline: []\n---\n" + head + "  timeline: []\n", "document 2: a second Scenario"},
		"unknown field":    {head + "  timeline: []\n  speed: 2\n", `document 1: Scenario.scenario.holdfast.dev "x" is invalid: spec.speed: Forbidden: unknown field`},
		"wrong apiVersion": {strings.Replace(head, "holdfast.dev/v1alpha1", "holdfast.dev/v1", 1) + "  timeline: []\n", `apiVersion: Unsupported value: "holdfast.dev/v1": supported values: "scenario.holdfast.dev/v1alpha1", "holdfast.dev/v1alpha1"`},
		"unknown kind":     {head + "  timeline: []\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n", "document 2: no kind \"Widget\""},
		"two operations": {head + "  timeline:\n  - at: 1s\n    cordon: {nodes: [node-0]}\n    uncordon: {nodes: [node-0]}\n",
			`spec.timeline[0]: Invalid value: "2 operations": want exactly one of apply, drain, cordon, uncordon`},
		"out of order": {head + "  timeline:\n  - at: 2s\n    cordon: {nodes: [node-0]}\n  - at: 1s\n    uncordon: {nodes: [node-0]}\n",
			`spec.timeline[1].at: Invalid value: "1s": comes before the previous step's 2s`},
		"unknown workload kind": {head + "  timeline:\n  - at: 1s\n    apply: {workload: {kind: Job, namespace: a, name: b}, replicas: 1}\n",
			`spec.timeline[0].apply.workload.kind: Unsupported value: "Job"`},
		"empty apply": {head + "  timeline:\n  - at: 1s\n    apply: {workload: {kind: Deployment, namespace: a, name: b}}\n",
			"spec.timeline[0].apply: Required value: set a template, replicas or both"},
		"daemonset replicas": {head + "  timeline:\n  - at: 1s\n    apply: {workload: {kind: DaemonSet, namespace: a, name: b}, replicas: 2}\n",
			"spec.timeline[0].apply.replicas: Forbidden: a DaemonSet has no replicas"},
		"template without labels": {head + "  timeline:\n  - at: 1s\n    apply: {workload: {kind: Deployment, namespace: a, name: b}, template: {spec: {containers: [{name: c, image: i}]}}}\n",
			"spec.timeline[0].apply.template.metadata.labels: Required value: a pod template needs labels"},
		"negative duration":   {head + "  podStartup: -1s\n  timeline: []\n", `spec.podStartup: Invalid value: "-1s": never negative`},
		"until before a step": {head + "  until: 1m\n  timeline:\n  - at: 2m\n    cordon: {nodes: [node-0]}\n", `spec.until: Invalid value: "1m0s": ends the scenario before its last step at 2m0s`},
		"zero retry":          {head + "  timeline:\n  - at: 1s\n    drain: {nodes: [node-0], retryAfter: 0s}\n", `spec.timeline[0].drain.retryAfter: Invalid value: "0s": want a positive wait`},
		"invalid policy": {head + "  timeline: []\n---\napiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: p}\nspec:\n  targets: {selector: {matchLabels: {app: \"a b\"}}}\n",
			"document 2: DisruptionPolicy.holdfast.dev \"p\" is invalid: spec.targets.selector.matchLabels: Invalid value: label keys must be qualified names"},
		"misspelt policy field": {head + "  timeline: []\n---\napiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: p}\nspec:\n  targets: {}\n  maxUnavailble: 1\n",
			"document 2: DisruptionPolicy.holdfast.dev \"p\" is invalid: spec.maxUnavailble: Forbidden: unknown field"},
		"duplicate node group": {strings.Replace(head, "[{prefix: node, count: 1}]", "[{prefix: node, count: 1}, {prefix: node, count: 2}]", 1) + "  timeline: []\n",
			`spec.nodes[1].prefix: Duplicate value: "node"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load([]string{writeFile(t, tc.file)}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// What Load accepts but the cluster cannot hold fails Run with the file and document.
func TestBadCluster(t *testing.T) {
	const head = "apiVersion: holdfast.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec:\n  nodes: [{prefix: node, count: 1}]\n"
	for name, tc := range map[string]struct{ file, want string }{
		"unknown node": {head + "  timeline:\n  - at: 1s\n    drain: {nodes: [m-0]}\n", "document 1: spec.timeline[0] at 1s: no node m-0 in the scenario"},
		"unschedulable start": {head + "  timeline: []\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: a}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: d}}}]}}\n      containers: [{name: c, image: i}]\n",
			"Deployment a/d: 1 of its starting pods cannot be scheduled"},
		"selector mismatch": {head + "  timeline: []\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: a}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: d}}, spec: {containers: [{name: c, image: i}]}}\n",
			"document 2: Deployment a/d: spec.template.metadata.labels: map[app:d] does not match spec.selector app=x"},
		"replicas before a template": {head + "  timeline:\n  - at: 1s\n    apply: {workload: {kind: Deployment, namespace: a, name: b}, replicas: 2}\n",
			"document 1: spec.timeline[0].apply at 1s: Deployment a/b does not exist yet: its first apply needs a template"},
		"workload without namespace": {head + "  timeline: []\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: d}}\n  template: {metadata: {labels: {app: d}}, spec: {containers: [{name: c, image: i}]}}\n",
			"document 2: Deployment /d: metadata.namespace is required"},
	} {
		t.Run(name, func(t *testing.T) {
			sc, err := Load([]string{writeFile(t, tc.file)}, nil)
			if err == nil {
				_, err = Run(sc)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A sequential drain (one kubectl drain of several nodes) takes the nodes in order, each
// begun once the previous one is empty.
func TestSequentialDrain(t *testing.T) {
	res := run(t, load(t, writeFile(t, `apiVersion: holdfast.dev/v1alpha1
kind: Scenario
metadata: {name: seq}
spec:
  nodes: [{prefix: node, count: 8}]
  podStartup: 2s
  timeline:
  - at: 0s
    drain: {nodes: [node-0, node-1, node-2, node-3], retryAfter: 5s, sequential: true}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: x}
spec:
  replicas: 4
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: a}}}]}}
      containers: [{name: c, image: i}]
---
apiVersion: holdfast.dev/v1alpha1
kind: DisruptionPolicy
metadata: {name: a}
spec:
  targets: {selector: {matchLabels: {app: a}}}
  maxUnavailable: 1
  cooldown: 10s
`)))
	var order []string
	for _, e := range res.Timeline {
		if e.Request == "drain" {
			order = append(order, e.Object)
		}
		if e.Request == "EVICT" && e.Answer == "allowed" && len(order) < 3 && strings.Contains(e.Object, "node-3") {
			t.Errorf("node-3 evicted before node-2 was drained: %+v", e)
		}
	}
	if !slices.Equal(order, []string{"node-0", "node-1", "node-2", "node-3"}) {
		t.Errorf("nodes drained in order %v", order)
	}
	if w := res.Workloads[0]; w.MaxUnavailable != 1 || w.MinEvictionGapSeconds < 10 {
		t.Errorf("want one pod at a time, 10s apart; got %+v", w)
	}
}

// TestZoneDrain: scenarios/zone-drain.yaml drains servers in two zones at once. Its policy
// without the topology budget lets both zones lose servers together; with it, the second
// zone waits for the first zone's replacements.
func TestZoneDrain(t *testing.T) {
	sc := load(t, shipped("zone-drain"))
	const zone = "topology.kubernetes.io/zone"
	noZones := *sc
	noZones.Objects = slices.Clone(sc.Objects)
	for i, o := range noZones.Objects {
		if p, ok := o.Object.(*v1alpha1.DisruptionPolicy); ok {
			p = p.DeepCopy()
			p.Spec.TopologyBudget = nil
			noZones.Objects[i].Object = p
		}
	}
	if w := run(t, &noZones).Workloads[0]; w.MaxDisruptedDomains[zone] != 2 {
		t.Errorf("without topologyBudget: want both zones disrupted at once; got %+v", w)
	}
	res := run(t, sc)
	w, d := res.Workloads[0], res.Drains[0]
	if w.MaxDisruptedDomains[zone] != 1 || w.Evictions != 4 || d.Drained != 4 || d.Deferred == 0 {
		t.Errorf("want one zone at a time, 4 evictions, 4/4 drained after deferrals; got %+v, %+v", w, d)
	}
	for _, o := range res.Expectations {
		if !o.Met {
			t.Errorf("expectation not met: %+v", o)
		}
	}
}

// TestGuardsReadWhatTheCacheHolds: the simulated guards read the cluster as holdfast's
// cache holds it (app.CacheOptions' transforms: templates packed, revisions slimmed, pods
// lean), not as the simulation stores it.
func TestGuardsReadWhatTheCacheHolds(t *testing.T) {
	s := &sim{store: memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID})}
	if err := s.holdfast(); err != nil {
		t.Fatal(err)
	}
	d := utiltesting.MakeDeployment("tenant", "kas").Obj()
	s.store.Put(d)
	var got appsv1.Deployment
	if err := s.rollout.Reader.Get(context.Background(), client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Template.Spec.Containers != nil || got.Annotations[workload.PackedTemplateAnnotation] == "" {
		t.Errorf("the rollout guard reads the Deployment as stored (containers %v, annotations %v), not as the cache holds it",
			got.Spec.Template.Spec.Containers, got.Annotations)
	}
}

// TestFleetLimitOverNamespacesSelectedByLabel: a fleet limit whose policy selects
// namespaces by label holds the second workload's rollout while the first runs, as the
// webhook does in the cluster. The store simulate runs on once listed no namespace's
// metadata: every workload then read as unselected, and both rolled out at once.
func TestFleetLimitOverNamespacesSelectedByLabel(t *testing.T) {
	sc := load(t, writeFile(t, `
apiVersion: holdfast.dev/v1alpha1
kind: Scenario
metadata: {name: fleet-by-namespace}
spec:
  nodes:
  - {prefix: node, count: 3}
  podStartup: 3s
  timeline:
  - at: 1s
    apply:
      workload: {kind: Deployment, namespace: tenant-a, name: kas}
      template: {metadata: {labels: {app: kas}}, spec: {containers: [{name: kas, image: "kas:2"}]}}
  - at: 2s
    apply:
      workload: {kind: Deployment, namespace: tenant-b, name: kas}
      template: {metadata: {labels: {app: kas}}, spec: {containers: [{name: kas, image: "kas:2"}]}}
---
apiVersion: v1
kind: Namespace
metadata: {name: tenant-a, labels: {tier: hosted}}
---
apiVersion: v1
kind: Namespace
metadata: {name: tenant-b, labels: {tier: hosted}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kas, namespace: tenant-a}
spec:
  replicas: 2
  selector: {matchLabels: {app: kas}}
  template: {metadata: {labels: {app: kas}}, spec: {containers: [{name: kas, image: "kas:1"}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kas, namespace: tenant-b}
spec:
  replicas: 2
  selector: {matchLabels: {app: kas}}
  template: {metadata: {labels: {app: kas}}, spec: {containers: [{name: kas, image: "kas:1"}]}}
---
apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: hosted}
spec:
  mode: Enforce
  targets: {kinds: [Deployment], namespaceSelector: {matchLabels: {tier: hosted}}}
  rules: {concurrency: {maxInFlight: 1}}
`))
	res := run(t, sc)
	a, b := res.Workload("Deployment tenant-a/kas"), res.Workload("Deployment tenant-b/kas")
	if a.Refusals != 0 || b.Refusals == 0 || !a.Converged || !b.Converged {
		t.Fatalf("want tenant-b's rollout held while tenant-a's ran, then both rolled out; got %+v and %+v", a, b)
	}
	var refused *Entry
	for i := range res.Timeline {
		if e := &res.Timeline[i]; e.Answer != "admitted" && e.Request == "UPDATE" {
			refused = e
			break
		}
	}
	if refused == nil || !strings.Contains(refused.Message, "[hosted/concurrency]") {
		t.Errorf("the first refusal: %+v, want the fleet limit's", refused)
	}
}
