//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestZoneDrain drains four nodes in two zones at once (labelled by a key of the test's
// own, so that the key is shown configurable and no other test's pods see zones): they are
// cordoned and every agent of a DaemonSet on them is evicted directly and retried on 429,
// as cluster-autoscaler and Karpenter do, under a DisruptionPolicy whose pod budget allows
// all four at once and whose topologyBudget allows one zone. The agents come back on their
// cordoned nodes (a DaemonSet's pods tolerate unschedulable): holdfast counts each as the
// replacement of the agent it evicted, so the drain goes zone by zone, and finishes.
func TestZoneDrain(t *testing.T) {
	const poolLabel, zoneKey = "holdfast.dev/e2e-zone-pool", "holdfast.dev/e2e-zone"
	f := features.New("zone drain").
		Assess("a drain of two zones goes zone by zone", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "zones")
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) < 4 {
				t.Fatalf("want at least 4 nodes: %d, %v", len(nodes.Items), err)
			}
			zoneOf := map[string]string{}
			drained := map[string]bool{}
			for i, n := range nodes.Items[len(nodes.Items)-4:] {
				zone := []string{"zone-a", "zone-b"}[i/2]
				zoneOf[n.Name], drained[n.Name] = zone, true
				patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true",%q:%q}}}`, poolLabel, zoneKey, zone))
				if err := c.Patch(ctx, &n, client.RawPatch(types.MergePatchType, patch)); err != nil {
					t.Fatal(err)
				}
				defer func() {
					_ = c.Patch(context.Background(), &n, client.RawPatch(types.MergePatchType,
						[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null}}}`, poolLabel, zoneKey))))
				}()
			}
			namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
				s.MaxUnavailable = ptr.To(intstr.FromInt32(4))
				s.TopologyBudget = &v1alpha1.TopologyBudget{Key: zoneKey, MaxDisruptedDomains: 1}
			})
			tmpl := utiltesting.MakeDeployment(ns, "zone-agent").Obj().Spec.Template
			tmpl.Spec.NodeSelector = map[string]string{poolLabel: "true"}
			// kwok lets a deleted pod linger for its grace period: a short one keeps the test short.
			tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zone-agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			pods := waitReadyPods(ctx, t, c, ns, "zone-agent", 4)
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds)
				return err == nil && ds.Status.DesiredNumberScheduled == 4 && ds.Status.NumberAvailable == 4, err
			}); err != nil {
				t.Fatalf("DaemonSet status: %v", err)
			}
			cordon(ctx, t, cs, drained)
			defer uncordon(ctx, t, cs, drained)

			// Watch which zones have a node without a serving agent: a zone is disrupted from
			// an agent's deletion until its replacement on that node is Ready.
			watchCtx, stopWatch := context.WithCancel(ctx)
			var mu sync.Mutex
			maxZones, firstDown := 0, map[string]time.Time{}
			var watchDone sync.WaitGroup
			watchDone.Go(func() {
				for watchCtx.Err() == nil {
					var list corev1.PodList
					if err := c.List(watchCtx, &list, client.InNamespace(ns)); err == nil {
						serving := map[string]bool{}
						for _, p := range list.Items {
							if p.DeletionTimestamp == nil && podReady(&p) {
								serving[p.Spec.NodeName] = true
							}
						}
						down := map[string]bool{}
						for n, z := range zoneOf {
							if !serving[n] {
								down[z] = true
							}
						}
						mu.Lock()
						maxZones = max(maxZones, len(down))
						for z := range down {
							if _, ok := firstDown[z]; !ok {
								firstDown[z] = time.Now()
							}
						}
						mu.Unlock()
					}
					time.Sleep(100 * time.Millisecond)
				}
			})

			start := time.Now()
			var wg sync.WaitGroup
			var deferrals sync.Map
			for _, pod := range pods {
				wg.Go(func() {
					deadline := time.Now().Add(45 * time.Second)
					for time.Now().Before(deadline) {
						ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}}
						err := cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod.Name).
							SubResource("eviction").Body(ev).MaxRetries(0).Do(ctx).Error()
						if err == nil || apierrors.IsNotFound(err) {
							return
						}
						if !apierrors.IsTooManyRequests(err) {
							t.Errorf("evicting %s: %v", pod.Name, err)
							return
						}
						n, _ := deferrals.LoadOrStore(pod.Name, new(int))
						*n.(*int)++
						time.Sleep(500 * time.Millisecond)
					}
					t.Errorf("eviction of %s never admitted", pod.Name)
				})
			}
			wg.Wait()
			waitReadyPods(ctx, t, c, ns, "zone-agent", 4)
			seconds := time.Since(start).Seconds()
			stopWatch()
			watchDone.Wait()
			held := 0
			deferrals.Range(func(_, v any) bool { held += *v.(*int); return true })
			gap := firstDown["zone-b"].Sub(firstDown["zone-a"])
			if gap < 0 {
				gap = -gap
			}
			fmt.Printf("SCENARIO zones maxZonesDisruptedSeen=%d budget=1 agents=4 zones=2 deferrals=%d secondZoneAfterSeconds=%.1f drainSeconds=%.1f\n",
				maxZones, held, gap.Seconds(), seconds)
			if maxZones != 1 {
				t.Errorf("%d zones had agents down at once, want exactly 1 at a time", maxZones)
			}
			if len(firstDown) != 2 || held == 0 {
				t.Errorf("zones drained %v with %d deferrals; want both zones drained, the second held", firstDown, held)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
