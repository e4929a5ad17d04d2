//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
)

const (
	fleetTenants     = 9
	fleetMaxInFlight = 3
	// fleetLabel marks the tenants' namespaces (the policy's selection) and Deployments.
	fleetLabel = "holdfast.dev/fleet"
)

// TestFleetStorm is the fleet storm: 9 tenant control planes under one policy with
// maxInFlight 3, and an operator that changes every tenant's template three times within
// 5 s and requeues on refusal. From the Deployments' and ReplicaSets' watch events: never
// more than 3 tenants roll out at once, never more than 2 ReplicaSets of a tenant have
// pods at once, all converge in the bound, and a tenant no policy selects is never refused.
func TestFleetStorm(t *testing.T) {
	f := features.New("fleet storm").
		Assess("at most maxInFlight tenants roll out at once", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			run := envconf.RandomName("fleet", 12)
			var tenants []client.ObjectKey
			for i := range fleetTenants {
				ns := fmt.Sprintf("%s-t%d", run, i)
				if err := c.Create(ctx, namespaceLabelled(ns, map[string]string{fleetLabel: run})); err != nil {
					t.Fatal(err)
				}
				tenants = append(tenants, client.ObjectKey{Namespace: ns, Name: "kube-apiserver"})
			}
			free := client.ObjectKey{Namespace: run + "-free", Name: "kube-apiserver"}
			if err := c.Create(ctx, namespaceLabelled(free.Namespace, nil)); err != nil {
				t.Fatal(err)
			}
			p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: run}, Spec: v1alpha1.RolloutPolicySpec{
				Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: run}}},
				Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{},
					Concurrency: &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(fleetMaxInFlight)}}}}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
			if err := harness.WaitIntercepted(ctx, c, p); err != nil {
				t.Fatal(err)
			}

			// The tenants are created and settle first, one rollout slot at a time or not:
			// a CREATE is never held.
			for _, k := range append(tenants, free) {
				if err := c.Create(ctx, fleetDeployment(k, run, 0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				got := &v1alpha1.RolloutPolicy{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil || got.Status.InFlight == nil {
					return false, nil
				}
				return *got.Status.InFlight == 0 && got.Status.WorkloadsMatched == fleetTenants, nil
			}); err != nil {
				t.Fatalf("the tenants never settled: %v", err)
			}
			// Settled means serving: a tenant whose pods never became available holds no slot
			// (it has nothing to disrupt), so the storm starts once every first rollout finished.
			for _, k := range tenants {
				waitJournal(ctx, t, c, v1alpha1.KindDeployment, k.Namespace, k.Name, finished)
			}
			time.Sleep(time.Second) // both replicas' caches hold the journals

			w := watchFleet(ctx, t, cs, run)
			res := runFleetOperator(ctx, c, tenants, free)
			watched := w.stop()
			seconds := res.converged.Seconds()
			fmt.Printf("SCENARIO fleet-storm tenants=%d maxInFlightSeen=%d maxRevisions=%d maxRevisionsWithPods=%d converged=%d/%d seconds=%.0f admitted=%d refused=%d slowestRolloutSeconds=%.0f unguardedRefusals=%d\n",
				fleetTenants, watched.maxInFlight, watched.maxRevisions, watched.maxWithPods, res.done, fleetTenants, seconds,
				watched.rollouts, res.refusals, watched.slowest.Seconds(), res.freeRefusals)
			if watched.maxInFlight > fleetMaxInFlight {
				t.Errorf("%d tenants rolled out at once, want at most %d", watched.maxInFlight, fleetMaxInFlight)
			}
			if watched.maxWithPods > 2 {
				t.Errorf("a tenant had %d ReplicaSets with pods at once, want at most 2", watched.maxWithPods)
			}
			// A tenant admitted the first change rolls it out and then the last: three
			// ReplicaSets in all; none gets a fourth.
			if watched.maxRevisions > 3 {
				t.Errorf("a tenant has %d ReplicaSets, want at most 3", watched.maxRevisions)
			}
			bound := time.Duration(math.Ceil(float64(watched.rollouts)/fleetMaxInFlight))*watched.slowest + time.Minute
			if res.done != fleetTenants || res.converged > bound {
				t.Errorf("%d/%d tenants converged in %v, want all within %v", res.done, fleetTenants, res.converged, bound)
			}
			if res.freeRefusals != 0 {
				t.Errorf("the tenant no policy selects was refused %d times", res.freeRefusals)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

func namespaceLabelled(name string, labels map[string]string) client.Object {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// fleetDeployment is a tenant's kube-apiserver at generation gen of the operator.
func fleetDeployment(k client.ObjectKey, run string, gen int) *appsv1.Deployment {
	tmpl := harness.KamajiTemplate(1)
	tmpl.Annotations = map[string]string{"operator.example/generation": fmt.Sprint(gen)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, Labels: map[string]string{fleetLabel: run}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](harness.StormReplicas), MinReadySeconds: 5,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}
}

type fleetResult struct {
	done, refusals, freeRefusals int
	converged                    time.Duration
}

// runFleetOperator changes every tenant's template three times within 5 s (generations
// 1, 2, 3, 2.5 s apart): each tenant's loop applies the generation desired at that moment
// and, refused, requeues with backoff, until the last generation is rolled out.
func runFleetOperator(ctx context.Context, c client.Client, tenants []client.ObjectKey, free client.ObjectKey) fleetResult {
	const step, last = 2500 * time.Millisecond, 3
	start := time.Now()
	deadline := start.Add(6 * time.Minute)
	var mu sync.Mutex
	var res fleetResult
	var wg sync.WaitGroup
	for _, k := range append(tenants, free) {
		wg.Go(func() {
			backoff := 500 * time.Millisecond
			for time.Now().Before(deadline) && ctx.Err() == nil {
				gen := min(last, 1+int(time.Since(start)/step))
				want := fleetDeployment(k, "", gen).Spec.Template
				cur := &appsv1.Deployment{}
				if err := c.Get(ctx, k, cur); err != nil {
					time.Sleep(backoff)
					continue
				}
				if !equality.Semantic.DeepDerivative(want, cur.Spec.Template) {
					cur.Spec.Template = want
					switch err := c.Update(ctx, cur); {
					case err == nil:
						backoff = 500 * time.Millisecond
					case apierrors.IsForbidden(err):
						mu.Lock()
						if k == free {
							res.freeRefusals++
						} else {
							res.refusals++
						}
						mu.Unlock()
						time.Sleep(backoff)
						backoff = min(2*backoff, 2*time.Second)
					}
					continue
				}
				if gen == last && deploymentFinished(cur) {
					if k != free {
						mu.Lock()
						res.done++
						res.converged = max(res.converged, time.Since(start))
						mu.Unlock()
					}
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return res
}

func deploymentFinished(d *appsv1.Deployment) bool {
	s, n := d.Status, ptr.Deref(d.Spec.Replicas, 1)
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == n && s.AvailableReplicas == n && s.Replicas == n
}

type fleetWatch struct {
	// tenants prefixes the tenants' namespaces.
	tenants string
	mu      sync.Mutex
	// inFlight is since when each tenant's current rollout is unfinished.
	inFlight                               map[string]time.Time
	sets, withPods                         map[string]map[string]bool
	maxInFlight, maxRevisions, maxWithPods int
	rollouts                               int
	slowest                                time.Duration
	cancel                                 context.CancelFunc
	done                                   sync.WaitGroup
}

// watchFleet follows the tenants' Deployments and ReplicaSets by watch events.
func watchFleet(ctx context.Context, t *testing.T, cs kubernetes.Interface, run string) *fleetWatch {
	t.Helper()
	w := &fleetWatch{tenants: run + "-t", inFlight: map[string]time.Time{}, sets: map[string]map[string]bool{}, withPods: map[string]map[string]bool{}}
	ctx, w.cancel = context.WithCancel(ctx)
	sel := metav1.ListOptions{LabelSelector: fleetLabel + "=" + run}
	deps, err := cs.AppsV1().Deployments("").Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := cs.AppsV1().ReplicaSets("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.done.Go(func() { w.follow(deps.ResultChan(), w.deployment) })
	w.done.Go(func() { w.follow(sets.ResultChan(), w.replicaSet) })
	return w
}

func (w *fleetWatch) follow(ch <-chan watch.Event, on func(any)) {
	for ev := range ch {
		if ev.Type == watch.Added || ev.Type == watch.Modified {
			w.mu.Lock()
			on(ev.Object)
			w.mu.Unlock()
		}
	}
}

func (w *fleetWatch) deployment(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || !strings.HasPrefix(d.Namespace, w.tenants) {
		return
	}
	key := d.Namespace
	since, was := w.inFlight[key]
	switch now := time.Now(); {
	case !deploymentFinished(d) && !was:
		w.inFlight[key] = now
		w.rollouts++
	case deploymentFinished(d) && was:
		delete(w.inFlight, key)
		w.slowest = max(w.slowest, now.Sub(since))
	}
	w.maxInFlight = max(w.maxInFlight, len(w.inFlight))
}

func (w *fleetWatch) replicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok || !strings.HasPrefix(rs.Namespace, w.tenants) {
		return
	}
	owner := metav1.GetControllerOf(rs)
	if owner == nil || owner.Kind != "Deployment" {
		return
	}
	key := rs.Namespace
	if w.sets[key] == nil {
		w.sets[key], w.withPods[key] = map[string]bool{}, map[string]bool{}
	}
	w.sets[key][rs.Name] = true
	if rs.Status.Replicas > 0 || ptr.Deref(rs.Spec.Replicas, 0) > 0 {
		w.withPods[key][rs.Name] = true
	} else {
		delete(w.withPods[key], rs.Name)
	}
	w.maxRevisions = max(w.maxRevisions, len(w.sets[key]))
	w.maxWithPods = max(w.maxWithPods, len(w.withPods[key]))
}

// stop lets the watches see the end state, stops them and returns what they saw.
func (w *fleetWatch) stop() *fleetWatch {
	time.Sleep(time.Second)
	w.cancel()
	w.done.Wait()
	return w
}
