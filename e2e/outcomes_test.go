//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// Pod template labels by which kube names a pod's template (issue 28: a template is
// kube's identity, never an image tag).
const (
	revisionHash = appsv1.ControllerRevisionHashLabelKey // StatefulSets and DaemonSets
	templateHash = appsv1.DefaultDeploymentUniqueLabelKey
)

// TestDrainDuringRollout is the fleet's drain-during-rollout: a konnectivity-agent
// DaemonSet on the 8 nodes of its pool rolls out a new template (RollingUpdate,
// maxUnavailable 1) while 4 of the nodes are drained, under a RolloutPolicy whose
// sharedBudget is the agents' DisruptionPolicy (a budget of one). The drains evict the
// agents as cluster-autoscaler does, through kubectl's eviction loop, retrying their 429s.
// From the pods' watch events: the agents unavailable at once never exceed the budget,
// every drain finishes, and the rollout finishes, every pod on the new template and Ready.
// The line also says how the drains ended: by evictions kube admitted (the pods' own
// DisruptionTarget condition), or by the rollout replacing the pods they waited for,
// which kubectl counts as drained as well.
func TestDrainDuringRollout(t *testing.T) {
	const (
		pool           = "holdfast.dev/e2e-drain-rollout"
		agents, drains = 8, 4
		budget         = 1
	)
	f := features.New("drain during rollout").
		Assess("a drain and a rollout of the same agents spend one budget", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "drain-rollout")
			nodes := poolNodes(ctx, t, c, pool, agents)
			for _, n := range nodes {
				labelPool(t, c, n, pool, true)
			}
			namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
				s.MaxUnavailable = ptr.To(intstr.FromInt32(budget))
				s.Cooldown = &metav1.Duration{Duration: 2 * time.Second}
			})
			rp := utiltesting.MakeRolloutPolicy(ns + "-agents").Kinds(v1alpha1.KindDaemonSet).
				NamespaceSelector(map[string]string{corev1.LabelMetadataName: ns}).Obj()
			rp.Spec.Rules.Settle = &v1alpha1.SettleRule{}
			rp.Spec.Rules.SharedBudget = &v1alpha1.SharedBudget{DisruptionPolicy: ns}
			if err := c.Create(ctx, rp); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), rp) })
			if err := harness.WaitIntercepted(ctx, c, rp); err != nil {
				t.Fatal(err)
			}

			tmpl := quickPods(utiltesting.MakeDeployment(ns, "konnectivity-agent").Obj().Spec.Template)
			tmpl.Spec.NodeSelector = map[string]string{pool: "true"}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "konnectivity-agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl,
					UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
						RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			waitReadyPods(ctx, t, c, ns, ds.Name, agents)
			dsStatus(ctx, t, c, ds, func(s *appsv1.DaemonSetStatus) bool {
				return s.DesiredNumberScheduled == agents && s.NumberAvailable == agents && s.UpdatedNumberScheduled == agents
			})
			waitJournal(ctx, t, c, v1alpha1.KindDaemonSet, ns, ds.Name, finished)
			before := liveTemplates(ctx, t, c, ns, ds.Name, revisionHash)

			budgetWatch, err := harness.WatchBudget(ctx, cs, ns, "app", agents, budget)
			if err != nil {
				t.Fatal(err)
			}
			templates, err := harness.WatchTemplates(ctx, cs, ns, "app="+ds.Name, revisionHash)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			const b = "registry.example/konnectivity-agent:b"
			if err := updateStored(ctx, c, ds, func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].Image = b }); err != nil {
				t.Fatalf("the rollout of a settled DaemonSet with no eviction in its group was refused: %v", err)
			}
			// The rollout's end, as kube's status shows it, timed while the drains run.
			var rolloutSeconds float64
			var rolloutDone sync.WaitGroup
			rolloutDone.Go(func() {
				_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
					cur := &appsv1.DaemonSet{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(ds), cur); err != nil {
						return false, nil
					}
					s := cur.Status
					done := s.ObservedGeneration == cur.Generation && s.UpdatedNumberScheduled == agents && s.NumberAvailable == agents
					if done {
						rolloutSeconds = time.Since(start).Seconds()
					}
					return done, nil
				})
			})

			// While it runs, 4 of the 8 nodes are drained at once.
			var wg sync.WaitGroup
			var mu sync.Mutex
			drained := 0
			drainConfig, deferred := harness.CountStatus(cfg.Client().RESTConfig(), http.StatusTooManyRequests)
			drainer := kubernetes.NewForConfigOrDie(drainConfig)
			drainedNodes := map[string]bool{}
			t.Cleanup(func() { uncordon(context.Background(), t, cs, drainedNodes) })
			for _, n := range nodes[:drains] {
				drainedNodes[n.Name] = true
				wg.Go(func() {
					err := harness.EvictNodePods(ctx, drainer, n.Name, ns)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("draining %s: %v", n.Name, err)
						return
					}
					drained++
				})
			}
			wg.Wait()
			drainSeconds := time.Since(start).Seconds()
			rolloutDone.Wait()

			// Rolled out: every remaining pod runs one template, not the one before, and is Ready.
			rolledOut := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": ds.Name}); err != nil {
					return false, err
				}
				ready, hashes := 0, map[string]bool{}
				for i := range pods.Items {
					p := &pods.Items[i]
					if workload.PodEnded(p) {
						continue
					}
					hashes[p.Labels[revisionHash]] = true
					if workload.PodServing(p) && p.Spec.Containers[0].Image == b {
						ready++
					}
				}
				return ready == agents && len(hashes) == 1 && !before[firstKey(hashes)], nil
			}) == nil
			res, tres := budgetWatch.Stop(), templates.Stop()
			fmt.Printf("SCENARIO drain-during-rollout maxUnavailableSeen=%d budget=%d drained=%d/%d rolledOut=%t rolloutSeconds=%.1f drainSeconds=%.1f evictionsAdmitted=%d evictionsDeferred=%d replaced=%d maxTemplatesLive=%d\n",
				res.MaxUnavailable, budget, drained, drains, rolledOut, rolloutSeconds, drainSeconds, res.Evicted, deferred.Load(), res.Evictions-res.Evicted, tres.MaxLive)
			if res.Err != nil || tres.Err != nil {
				t.Errorf("the pods' watch ended early: %v, %v", res.Err, tres.Err)
			}
			if res.MaxUnavailable > budget || res.OverBudget > 0 {
				t.Errorf("%d agents unavailable at once (%d departures over budget), want at most the shared budget of %d",
					res.MaxUnavailable, res.OverBudget, budget)
			}
			if drained != drains {
				t.Errorf("%d of %d drains finished", drained, drains)
			}
			if !rolledOut {
				t.Errorf("the rollout never finished: want %d Ready agents, all on one new template", agents)
			}
			if tres.MaxLive > 2 {
				t.Errorf("pods of %d templates at once: %v", tres.MaxLive, tres.Worst)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestPartitionedCanaryGetsNoThirdTemplate is finding 2: a StatefulSet rolled from A to B
// under a partition (its canary: ordinal 2 on B, 0 and 1 on A) is not finished. An edit to
// a third template C is refused, naming the partition, and so it is under partition 1;
// lowering the partition is admitted, and C is once every pod runs B. Kube's pods never run more than two templates.
func TestPartitionedCanaryGetsNoThirdTemplate(t *testing.T) {
	f := features.New("partitioned canary").
		Assess("a third template waits until the canary is rolled out", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "sts-canary")
			settlePolicyIn(ctx, t, c, ns)
			templates, err := harness.WatchTemplates(ctx, cs, ns, "app=web", revisionHash)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := quickPods(utiltesting.MakeDeployment(ns, "web").Obj().Spec.Template)
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), ServiceName: "web", Template: tmpl,
					Selector:            &metav1.LabelSelector{MatchLabels: tmpl.Labels},
					PodManagementPolicy: appsv1.ParallelPodManagement,
					UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
						RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}}}
			if err := c.Create(ctx, sts); err != nil {
				t.Fatal(err)
			}
			const a, b, cc = "registry.example/main:1", "registry.example/main:b", "registry.example/main:c"
			waitOrdinals(ctx, t, c, ns, "web", a, a, a)
			waitJournal(ctx, t, c, v1alpha1.KindStatefulSet, ns, sts.Name, finished)
			update := func(mut func(*appsv1.StatefulSet), opts ...client.UpdateOption) error {
				return updateStored(ctx, c, sts, mut, opts...)
			}
			image := func(img string) func(*appsv1.StatefulSet) {
				return func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = img }
			}

			// The canary: ordinal 2 on B.
			if err := update(image(b)); err != nil {
				t.Fatalf("the canary's edit to B was refused: %v", err)
			}
			waitOrdinals(ctx, t, c, ns, "web", a, a, b)
			// C would be a third template with pods. Dry runs until holdfast's cache shows the
			// canary (they change nothing), then for real.
			admittedProbes := probeUntilRefused(ctx, t, func() error { return update(image(cc), client.DryRunAll) })
			refused := update(image(cc))
			if !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), "lower the partition") {
				t.Fatalf("an edit to a third template over a partitioned canary: %v, want 403 naming the partition", refused)
			}
			// The way on: lower the partition, first to 1 (ordinal 0 still runs A, so C
			// still waits), then to 0.
			partition := func(n int32) func(*appsv1.StatefulSet) {
				return func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(n) }
			}
			if err := update(partition(1)); err != nil {
				t.Fatalf("lowering the partition of the canary to 1 was refused: %v", err)
			}
			waitOrdinals(ctx, t, c, ns, "web", a, b, b)
			// Until ordinal 1's new pod is Ready, settle refuses first (the rollout to B is
			// unfinished): dry runs until the refusal is the partition's, then for real.
			var partitioned error
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				partitioned = update(image(cc), client.DryRunAll)
				return partitioned == nil || strings.Contains(partitioned.Error(), "lower the partition"), nil
			})
			if err := update(image(cc)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "lower the partition") {
				t.Fatalf("an edit to C while ordinal 0 runs A under partition 1: %v, want 403 naming the partition", err)
			}
			if err := update(partition(0)); err != nil {
				t.Fatalf("lowering the partition of the canary to 0 was refused: %v", err)
			}
			if err := update(image(cc), client.DryRunAll); !apierrors.IsForbidden(err) {
				t.Errorf("an edit to C while ordinal 0 still runs A: %v, want 403", err)
			}
			waitOrdinals(ctx, t, c, ns, "web", b, b, b)
			// Every pod runs B: C is admitted within a bound.
			rolled := time.Now()
			retryUntilAdmitted(ctx, t, "the edit to C once every pod runs B", func(opts ...client.UpdateOption) error { return update(image(cc), opts...) })
			admittedAfter := time.Since(rolled).Seconds()
			waitOrdinals(ctx, t, c, ns, "web", cc, cc, cc)
			res := templates.Stop()
			fmt.Printf("SCENARIO statefulset-partition-canary thirdTemplateRefused=true partitionLowered=true cAdmittedAfterSeconds=%.1f admittedDryRunsBeforeRefusal=%d maxTemplatesLive=%d templates=%d\n",
				admittedAfter, admittedProbes, res.MaxLive, len(res.Templates))
			if res.Err != nil {
				t.Errorf("the pods' watch ended early: %v", res.Err)
			}
			if res.MaxLive > 2 {
				t.Errorf("pods of %d templates at once: %v", res.MaxLive, res.Worst)
			}
			if len(res.Templates) != 3 {
				t.Errorf("templates with pods over the test: %v, want A, B and C", res.Templates)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestFlagFollowingScaleDuringRollout is finding 7: a konnectivity-server Deployment
// whose --server-count follows its replicas rolls from A to B, B's pods slow to become
// Ready, so that both ReplicaSets have pods. A scale from 3 to 4 with --server-count=4
// would be a third template: refused while both have pods, admitted once the rollout has
// finished; during that scale's own rollout a scale on to 5 is refused and the scale back
// to 3 admitted. Kube's pods never run more than two templates.
func TestFlagFollowingScaleDuringRollout(t *testing.T) {
	f := features.New("flag-following scale").
		Assess("a scale that changes the template waits for the rollout", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "scale-rollout")
			settlePolicyIn(ctx, t, c, ns)
			templates, err := harness.WatchTemplates(ctx, cs, ns, "app=kas", templateHash)
			if err != nil {
				t.Fatal(err)
			}
			d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
			d.Spec.Template = quickPods(d.Spec.Template)
			// B's three pods start together (and A's go once they are available).
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("100%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			waitReadyPods(ctx, t, c, ns, d.Name, 3)
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, d.Name, finished)
			update := func(mut func(*appsv1.Deployment), opts ...client.UpdateOption) error {
				return updateStored(ctx, c, d, mut, opts...)
			}
			scale := func(n int32) func(*appsv1.Deployment) {
				return func(d *appsv1.Deployment) {
					d.Spec.Replicas = ptr.To(n)
					d.Spec.Template.Spec.Containers[1].Args = []string{fmt.Sprintf("--server-count=%d", n)}
				}
			}

			// B: its pods Ready 10 s after they start.
			if err := update(func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:b"
				for k, v := range map[string]string{"pod-ready.stage.kwok.x-k8s.io/delay": "10s", "pod-ready.stage.kwok.x-k8s.io/jitter-delay": "10s"} {
					d.Spec.Template.Annotations[k] = v
				}
			}); err != nil {
				t.Fatalf("the rollout to B was refused: %v", err)
			}
			waitLiveTemplates(ctx, t, c, ns, d.Name, templateHash, 2) // B's pods join A's
			admittedProbes := probeUntilRefused(ctx, t, func() error { return update(scale(4), client.DryRunAll) })
			refused := update(scale(4))
			live := len(liveTemplates(ctx, t, c, ns, d.Name, templateHash))
			if !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), "finish or roll back first") {
				t.Fatalf("a flag-following scale while pods of %d templates are live: %v, want 403 (finish or roll back first)", live, refused)
			}

			// The rollout finishes: the scale is admitted within a bound.
			waitRolledOut(ctx, t, c, d)
			finishedAt := time.Now()
			retryUntilAdmitted(ctx, t, "the scale to 4 once the rollout finished", func(opts ...client.UpdateOption) error { return update(scale(4), opts...) })
			admittedAfter := time.Since(finishedAt).Seconds()
			// B@4 rolls out, its pods as slow as B's: a scale on to 5 would be a third
			// template (A, B@3, B@4, B@5 in the finding) and is refused; the scale back to 3
			// returns to B@3, which still has pods, and is admitted.
			waitLiveTemplates(ctx, t, c, ns, d.Name, templateHash, 2) // B@4's pods join B@3's
			probeUntilRefused(ctx, t, func() error { return update(scale(5), client.DryRunAll) })
			if err := update(scale(5)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "finish or roll back first") {
				t.Fatalf("a scale to 5 while B@3 and B@4 have pods: %v, want 403 (finish or roll back first)", err)
			}
			if err := update(scale(3)); err != nil {
				t.Fatalf("the scale back to 3, a template that still has pods: %v, want admitted", err)
			}
			if cur := waitRolledOut(ctx, t, c, d); *cur.Spec.Replicas != 3 {
				t.Fatalf("the scale back to 3 settled at %d replicas", *cur.Spec.Replicas)
			}
			res := templates.Stop()
			fmt.Printf("SCENARIO flag-scale-during-rollout refusedWhileRolling=true scaleBackAdmitted=true admittedAfterSeconds=%.1f admittedDryRunsBeforeRefusal=%d maxTemplatesLive=%d templates=%d\n",
				admittedAfter, admittedProbes, res.MaxLive, len(res.Templates))
			if res.Err != nil {
				t.Errorf("the pods' watch ended early: %v", res.Err)
			}
			if res.MaxLive > 2 {
				t.Errorf("pods of %d templates at once: %v", res.MaxLive, res.Worst)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// quickPods gives the template's pods short kwok timing (Ready 1–3 s after they are
// scheduled, gone 1 s after they are deleted), so that a rollout of a few pods takes seconds.
func quickPods(tpl corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	for _, stage := range []string{"pod-create", "pod-ready"} {
		tpl.Annotations[stage+".stage.kwok.x-k8s.io/delay"] = "500ms"
		tpl.Annotations[stage+".stage.kwok.x-k8s.io/jitter-delay"] = "1500ms"
	}
	tpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return tpl
}

// probeUntilRefused repeats a dry run until it is refused (holdfast's cache lags the pods
// by a moment), and returns how many were admitted first.
func probeUntilRefused(ctx context.Context, t *testing.T, probe func() error) int {
	t.Helper()
	admitted := 0
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if probe() != nil {
			return true, nil
		}
		admitted++
		return false, nil
	}); err != nil {
		t.Fatalf("a dry run stayed admitted for 30 s (log: %s)", holdfastLog)
	}
	return admitted
}

// retryUntilAdmitted repeats the change until it is admitted (holdfast's cache sees what
// frees it a moment after the cluster shows it), for at most 30 s.
func retryUntilAdmitted(ctx context.Context, t *testing.T, what string, change func(...client.UpdateOption) error) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return change() == nil, nil
	}); err != nil {
		t.Fatalf("%s: %v, want admitted (log: %s)", what, change(client.DryRunAll), holdfastLog)
	}
}

// liveTemplates is the set of templates (by hashLabel) of the live pods labelled app=name.
func liveTemplates(ctx context.Context, t *testing.T, c client.Client, ns, name, hashLabel string) map[string]bool {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for i := range pods.Items {
		if !workload.PodEnded(&pods.Items[i]) {
			out[pods.Items[i].Labels[hashLabel]] = true
		}
	}
	return out
}

// waitLiveTemplates waits until the live pods labelled app=name run n templates (by
// hashLabel).
func waitLiveTemplates(ctx context.Context, t *testing.T, c client.Client, ns, name, hashLabel string, n int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(liveTemplates(ctx, t, c, ns, name, hashLabel)) == n, nil
	}); err != nil {
		t.Fatalf("the live pods of %s/%s run templates %v, want %d", ns, name, liveTemplates(ctx, t, c, ns, name, hashLabel), n)
	}
}

// waitRolledOut waits until the Deployment's rollout has finished, as kube's status says,
// and its live pods run one template; it returns the Deployment as it is then.
func waitRolledOut(ctx context.Context, t *testing.T, c client.Client, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	cur := &appsv1.Deployment{}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			return false, err
		}
		return deploymentFinished(cur) && len(liveTemplates(ctx, t, c, d.Namespace, d.Name, templateHash)) == 1, nil
	}); err != nil {
		t.Fatalf("the rollout of %s/%s never finished: %v", d.Namespace, d.Name, err)
	}
	return cur
}

// deleteOrphaning deletes the workload with --cascade=orphan, and waits until it is gone
// (its revisions and pods stay).
func deleteOrphaning(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))), nil
	}); err != nil {
		t.Fatalf("the orphaning delete of %s/%s never finished", obj.GetNamespace(), obj.GetName())
	}
}

// waitOrdinals waits until the StatefulSet's pods are exactly ordinals 0..n-1, each Ready
// and running images[ordinal], none terminating.
func waitOrdinals(ctx context.Context, t *testing.T, c client.Client, ns, name string, images ...string) {
	t.Helper()
	var got []string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return false, err
		}
		got = got[:0]
		ok := len(pods.Items) == len(images)
		for i := range pods.Items {
			p := &pods.Items[i]
			got = append(got, fmt.Sprintf("%s=%s ready=%t", p.Name, p.Spec.Containers[0].Image, workload.PodServing(p)))
			for ord, img := range images {
				if p.Name == fmt.Sprintf("%s-%d", name, ord) && (p.Spec.Containers[0].Image != img || !workload.PodServing(p)) {
					ok = false
				}
			}
		}
		return ok, nil
	}); err != nil {
		t.Fatalf("pods %v, want ordinals on %v", got, images)
	}
}

// dsStatus waits until the DaemonSet's status, of its current generation, is as want says.
func dsStatus(ctx context.Context, t *testing.T, c client.Client, ds *appsv1.DaemonSet, want func(*appsv1.DaemonSetStatus) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds)
		return err == nil && ds.Status.ObservedGeneration == ds.Generation && want(&ds.Status), err
	}); err != nil {
		t.Fatalf("DaemonSet status %+v: %v", ds.Status, err)
	}
}

// updateStored applies mut to the stored object and updates it, reading it again on a
// conflict (kube's controllers write its status meanwhile).
func updateStored[T client.Object](ctx context.Context, c client.Client, obj T, mut func(T), opts ...client.UpdateOption) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := obj.DeepCopyObject().(T)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return err
		}
		mut(cur)
		return c.Update(ctx, cur, opts...)
	})
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
