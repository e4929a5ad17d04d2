//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/simulate/sim"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestAgentDrain drains the four nodes of a konnectivity-agent Deployment at once with
// kubectl's drain library, as an upgrade would, under a DisruptionPolicy of one agent at a
// time, each replacement Ready for 10 s, evictions 20 s apart: the workload and policy of
// scenarios/agent-drain.yaml, whose simulation must agree with what the control plane did.
func TestAgentDrain(t *testing.T) {
	f := features.New("agent drain").
		Assess("drained agents go one at a time", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc, simRes := simulated(t, "agent-drain")
			simFig, simDrain := simulatedFigures(t, simRes)
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "agents")
			want, d := createScenarioGroup(ctx, t, c, ns, sc)
			agents := int(*d.Spec.Replicas)
			cool := want.Cooldown.Duration
			pods := waitReadyPods(ctx, t, c, ns, "konnectivity-agent", agents)
			nodes := map[string]bool{}
			for _, p := range pods {
				nodes[p.Spec.NodeName] = true
			}
			if len(nodes) != agents {
				t.Fatalf("agents on %d nodes, want one per node on %d", len(nodes), agents)
			}

			// The scenario starts settled: every agent available (Ready for minReadySeconds).
			time.Sleep(time.Duration(want.MinReadySeconds) * time.Second)
			w := harness.WatchGroup(ctx, c, ns, "konnectivity-agent", agents)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			gone := startGoneClock(ctx, c, pods)
			drained := drainAll(ctx, t, cs, nodes)
			// The nodes are shared with other tests' pods: the drain of the agents is
			// done when the last of them is gone.
			seconds := gone.Seconds()
			waitReadyPods(ctx, t, c, ns, "konnectivity-agent", agents)
			res := w.Stop()
			uncordon(ctx, t, cs, nodes)

			fmt.Printf("SCENARIO agent-drain maxUnavailableSeen=%d minGapSeconds=%d drained=%d/%d drainSeconds=%.1f evictedAt=%v simulated: maxUnavailable=%d minGapSeconds=%g drainSeconds=%g\n",
				res.MaxUnavailable, res.MinGapSeconds, drained, len(nodes), seconds, res.EvictedAt, simFig.MaxUnavailable, simFig.MinEvictionGapSeconds, simDrain.Seconds)
			if res.MaxUnavailable > 1 || res.MinGapSeconds < int(cool.Seconds()) || drained != len(nodes) || res.Evictions != agents {
				t.Errorf("want at most 1 agent unavailable, evictions at least %s apart and %d/%d nodes drained; got %+v, drained %d",
					cool, len(nodes), len(nodes), res, drained)
			}
			if simFig.MaxUnavailable != res.MaxUnavailable || simFig.Evictions != res.Evictions || simDrain.Drained != drained ||
				!withinFraction(simDrain.Seconds, seconds, 0.2) {
				t.Errorf("holdfast simulate disagrees with the control plane: simulated %+v, drain %+v; measured %+v, drain %d nodes in %.1fs",
					simFig, *simDrain, res, drained, seconds)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// waitReadyPods waits until n pods labelled app=name are Ready and none terminates.
func waitReadyPods(ctx context.Context, t *testing.T, c client.Client, ns, name string, n int) []corev1.Pod {
	t.Helper()
	ready, err := harness.ReadyPods(ctx, c, ns, name, n)
	if err != nil {
		t.Fatal(err)
	}
	return ready
}

// TestEvictionRace sends 20 concurrent evictions of 20 distinct pods of one group with a
// budget of one through both holdfast replicas: exactly one may pass.
func TestEvictionRace(t *testing.T) {
	const pods = 20
	f := features.New("eviction race").
		Assess("one eviction passes a budget of one across replicas", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, cs, ns := disruptionNamespace(ctx, t, cfg, "race", nil)
			ready := readyDeployment(ctx, t, c, ns, "agent", pods, nil)
			before := lb.Counts()
			var wg sync.WaitGroup
			var allowed, deferred atomic.Int32
			for _, pod := range ready {
				wg.Go(func() {
					err := evictOnce(ctx, cs, ns, pod.Name)
					switch {
					case err == nil:
						allowed.Add(1)
					case apierrors.IsTooManyRequests(err):
						deferred.Add(1)
					default:
						t.Errorf("evicting %s: %v", pod.Name, err)
					}
				})
			}
			wg.Wait()
			after := lb.Counts()
			fmt.Printf("SCENARIO eviction-race replicas=%d requests=%d allowed=%d budget=1\n", len(after), pods, allowed.Load())
			for i := range after {
				if after[i] == before[i] {
					t.Errorf("replica %d answered none of the evictions (%v → %v)", i, before, after)
				}
			}
			if allowed.Load() != 1 || deferred.Load() != pods-1 {
				t.Errorf("allowed %d, deferred %d; want exactly one allowed", allowed.Load(), deferred.Load())
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestKiamServers swaps the node group under a 3-replica kiam-server Deployment: three
// "old" nodes drained at once after the "new" ones joined, as scenarios/kiam-node-group-swap.yaml
// has it, whose simulation must agree with what the control plane did. Agents must never
// see fewer than two ready servers.
func TestKiamServers(t *testing.T) {
	f := features.New("kiam servers").
		Assess("a node-group swap keeps two servers ready", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc, simRes := simulated(t, "kiam-node-group-swap")
			simFig, simDrain := simulatedFigures(t, simRes)
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "kiam")
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) < 6 {
				t.Fatalf("want at least 6 nodes: %d, %v", len(nodes.Items), err)
			}
			old, rest := map[string]bool{}, map[string]bool{}
			for i, n := range nodes.Items {
				if i < 3 {
					old[n.Name] = true
				} else {
					rest[n.Name] = true
				}
			}
			// Only the old group exists when the servers start.
			cordon(ctx, t, cs, rest)
			defer uncordon(ctx, t, cs, old)
			defer uncordon(ctx, t, cs, rest)

			_, d := createScenarioGroup(ctx, t, c, ns, sc)
			servers := int(*d.Spec.Replicas)
			pods := waitReadyPods(ctx, t, c, ns, "kiam-server", servers)

			// The new group joins; the old one is drained at once.
			uncordon(ctx, t, cs, rest)
			w := harness.WatchGroup(ctx, c, ns, "kiam-server", servers)
			gone := startGoneClock(ctx, c, pods)
			drained := drainAll(ctx, t, cs, old)
			seconds := gone.Seconds()
			waitReadyPods(ctx, t, c, ns, "kiam-server", servers)
			res := w.Stop()
			fmt.Printf("SCENARIO kiam-servers minReadySeen=%d maxUnavailableSeen=%d drainSeconds=%.1f simulated: minReady=%d maxUnavailable=%d drainSeconds=%g\n",
				res.MinReady, res.MaxUnavailable, seconds, simFig.MinReady, simFig.MaxUnavailable, simDrain.Seconds)
			if res.MinReady < servers-1 || drained != len(old) {
				t.Errorf("want at least %d ready servers throughout and %d nodes drained; got %+v, drained %d", servers-1, len(old), res, drained)
			}
			// A drain of a few seconds: kwok's stages and the informers' latency (a second
			// or two per replacement) count for more than 20 %.
			close := withinFraction(simDrain.Seconds, seconds, 0.2) || math.Abs(simDrain.Seconds-seconds) <= 3
			if simFig.MaxUnavailable != res.MaxUnavailable || simFig.Evictions != res.Evictions || simDrain.Drained != drained || !close {
				t.Errorf("holdfast simulate disagrees with the control plane: simulated %+v, drain %+v; measured %+v, drain %d nodes in %.1fs",
					simFig, *simDrain, res, drained, seconds)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestDaemonSetEvictions evicts every pod of a 6-node DaemonSet agent directly through the
// eviction API, as cluster-autoscaler and Karpenter do (kubectl drain skips DaemonSet
// pods), each caller retrying its 429s: the budget of one holds.
func TestDaemonSetEvictions(t *testing.T) {
	const poolLabel = "holdfast.dev/e2e-agent-pool"
	f := features.New("daemonset evictions").
		Assess("direct evictions of a DaemonSet keep to the budget", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "ds")
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) < 6 {
				t.Fatalf("want at least 6 nodes: %d, %v", len(nodes.Items), err)
			}
			for _, n := range nodes.Items[:6] {
				patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, poolLabel))
				if err := c.Patch(ctx, &n, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Fatal(err)
				}
				defer func() {
					_ = c.Patch(context.Background(), &n, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, poolLabel))))
				}()
			}
			namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) { s.MinReadySeconds = 2 })
			tmpl := utiltesting.MakeDeployment(ns, "node-agent").Obj().Spec.Template
			tmpl.Spec.NodeSelector = map[string]string{poolLabel: "true"}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			pods := waitReadyPods(ctx, t, c, ns, "node-agent", 6)
			// Let the DaemonSet's status count the six nodes: it is the group's expected size.
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds)
				return err == nil && ds.Status.DesiredNumberScheduled == 6 && ds.Status.NumberAvailable == 6, err
			}); err != nil {
				t.Fatalf("DaemonSet status: %v", err)
			}

			w := harness.WatchGroup(ctx, c, ns, "node-agent", 6)
			var wg sync.WaitGroup
			for _, pod := range pods {
				wg.Go(func() {
					// Six one-at-a-time replacements take about 150 s on a quiet machine
					// (terminating linger, a new pod, Ready, minReadySeconds and its margin):
					// the last caller needs room beyond that on a loaded one.
					deadline := time.Now().Add(5 * time.Minute)
					for time.Now().Before(deadline) {
						err := evictOnce(ctx, cs, ns, pod.Name)
						if err == nil || apierrors.IsNotFound(err) {
							return
						}
						if !apierrors.IsTooManyRequests(err) {
							t.Errorf("evicting %s: %v", pod.Name, err)
							return
						}
						time.Sleep(time.Second)
					}
					t.Errorf("eviction of %s never admitted", pod.Name)
				})
			}
			wg.Wait()
			waitReadyPods(ctx, t, c, ns, "node-agent", 6)
			res := w.Stop()
			fmt.Printf("SCENARIO daemonset-evictions maxUnavailableSeen=%d budget=1\n", res.MaxUnavailable)
			if res.MaxUnavailable > 1 || res.Evictions != 6 {
				t.Errorf("want 6 evictions and at most 1 agent unavailable; got %+v", res)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// createScenarioGroup creates in ns the scenario's DisruptionPolicy (over ns) and its
// Deployment, its pods on the scenario's timing, and returns both.
func createScenarioGroup(ctx context.Context, t *testing.T, c client.Client, ns string, sc *sim.Scenario) (v1alpha1.DisruptionPolicySpec, *appsv1.Deployment) {
	t.Helper()
	want := scenarioObject[*v1alpha1.DisruptionPolicy](t, sc).Spec
	namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
		nsSel := s.Targets.NamespaceSelector
		*s = want
		s.Targets.NamespaceSelector = nsSel
	})
	d := scenarioObject[*appsv1.Deployment](t, sc)
	d.Namespace = ns
	kwokTimed(sc, &d.Spec.Template)
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	return want, d
}

// namespacePolicy creates a DisruptionPolicy over every pod of the namespace with a
// budget of one, changed by mut.
func namespacePolicy(ctx context.Context, t *testing.T, c client.Client, ns string, mut func(*v1alpha1.DisruptionPolicySpec)) {
	t.Helper()
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Targets: v1alpha1.PodTargets{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}}}
	if mut != nil {
		mut(&p.Spec)
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Gone with the test: its webhook entry must not outlive it into later tests' drains.
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	if err := harness.WaitIntercepted(ctx, c, p); err != nil {
		t.Fatal(err)
	}
}

// drainAll drains the nodes at once and reports failed drains as test errors.
func drainAll(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodes map[string]bool) int {
	t.Helper()
	drained, errs := harness.DrainAll(ctx, cs, slices.Collect(maps.Keys(nodes)))
	for _, err := range errs {
		t.Error(err)
	}
	return drained
}

func cordon(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodes map[string]bool) {
	t.Helper()
	if err := harness.Cordon(ctx, cs, slices.Collect(maps.Keys(nodes)), true); err != nil {
		t.Fatal(err)
	}
}

func uncordon(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodes map[string]bool) {
	t.Helper()
	if err := harness.Cordon(ctx, cs, slices.Collect(maps.Keys(nodes)), false); err != nil {
		t.Error(err)
	}
}
