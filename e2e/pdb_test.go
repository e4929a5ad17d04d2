//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestPDBFloor checks the generated PDBs on the kwok cluster, then stops holdfast (its
// webhooks failing open) and drains the agents' nodes: the PDB alone must hold the budget.
func TestPDBFloor(t *testing.T) {
	const agents = 4
	f := features.New("pdb floor").
		Assess("generated PDBs hold the budget while holdfast is down", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, cs, ns := disruptionNamespace(ctx, t, cfg, "floor", func(s *v1alpha1.DisruptionPolicySpec) {
				s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
				s.PDB = &v1alpha1.PDBGeneration{Generate: true}
				// While holdfast is down, these evictions are admitted unchecked.
				s.FailurePolicy = ptr.To(v1alpha1.FailurePolicyIgnore)
			})
			tmpl := utiltesting.MakeDeployment(ns, "node-agent").Obj().Spec.Template
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			pods := readyDeployment(ctx, t, c, ns, "agent", agents, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}}
			})

			dpdb := waitPDB(ctx, t, c, ns, workload.Ref{Kind: v1alpha1.KindDeployment, Name: "agent"}, func(p *policyv1.PodDisruptionBudget) bool {
				return p.Spec.MaxUnavailable != nil && p.Spec.MaxUnavailable.IntValue() == 1
			})
			if ref := metav1.GetControllerOf(dpdb); ref == nil || ref.Kind != "Deployment" || ref.Name != "agent" ||
				dpdb.Spec.Selector.MatchLabels["app"] != "agent" || *dpdb.Spec.UnhealthyPodEvictionPolicy != policyv1.IfHealthyBudget {
				t.Errorf("Deployment PDB = %+v, owners %+v", dpdb.Spec, dpdb.OwnerReferences)
			}
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil {
				t.Fatal(err)
			}
			want := int(len(nodes.Items)) - 1
			waitPDB(ctx, t, c, ns, workload.Ref{Kind: v1alpha1.KindDaemonSet, Name: "node-agent"}, func(p *policyv1.PodDisruptionBudget) bool {
				return p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntValue() == want && p.Spec.MaxUnavailable == nil
			})
			// kube's disruption controller must have processed the PDB before it guards anything.
			if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got := &policyv1.PodDisruptionBudget{}
				err := c.Get(ctx, client.ObjectKeyFromObject(dpdb), got)
				return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == agents, err
			}); err != nil {
				t.Fatalf("the disruption controller never processed %s: %v", dpdb.Name, err)
			}

			// Only this policy intercepts evictions now: earlier tests' policies are gone.
			onlyOwnEvictionEntry(ctx, t, c, ns)
			// holdfast goes down; the policy's webhook entry fails open.
			if _, err := stopHoldfast(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := startHoldfast(ctx, cfg); err != nil {
					t.Fatalf("restarting holdfast: %v", err)
				}
			}()

			agentNodes := map[string]bool{}
			for _, p := range pods {
				agentNodes[p.Spec.NodeName] = true
			}
			w := harness.WatchGroup(ctx, c, ns, "agent", agents)
			drained := drainAll(ctx, t, cs, agentNodes)
			waitReadyPods(ctx, t, c, ns, "agent", agents)
			res := w.Stop()
			uncordon(ctx, t, cs, agentNodes)
			fmt.Printf("SCENARIO pdb-floor webhook=down maxUnavailableSeen=%d budget=1\n", res.MaxUnavailable)
			if res.MaxUnavailable > 1 || drained != len(agentNodes) {
				t.Errorf("want at most 1 agent unavailable and %d nodes drained; got %+v, drained %d", len(agentNodes), res, drained)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestAnotherPDBBeforeAndAfterTheFloor: another PodDisruptionBudget over guarded pods, on
// the kwok cluster with kube's disruption controller. One created before the workload keeps
// holdfast from generating a second; after the floor, a weaker one is refused at admission,
// a stricter one is admitted and the floor steps back, and when it goes the floor returns.
// Meanwhile a drain evicts the pods over and over: kube answers 500 to an eviction of a pod
// two PDBs cover, and the drain must never see one (holdfast defers it while both exist).
func TestAnotherPDBBeforeAndAfterTheFloor(t *testing.T) {
	const agents = 3
	f := features.New("another pdb").
		Assess("no second PDB, no weaker floor, no 500", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, cs, ns := disruptionNamespace(ctx, t, cfg, "other-pdb", func(s *v1alpha1.DisruptionPolicySpec) { s.PDB = &v1alpha1.PDBGeneration{Generate: true} })
			userPDB := func(name, app string, maxUnavailable intstr.IntOrString) *policyv1.PodDisruptionBudget {
				return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable,
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			}
			deploy := func(name string) {
				readyDeployment(ctx, t, c, ns, name, agents, func(d *appsv1.Deployment) { d.Spec.Template = quickPods(d.Spec.Template) })
			}
			generated := func(name string) bool {
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pdb.Name(workload.Ref{Kind: v1alpha1.KindDeployment, Name: name})}, &policyv1.PodDisruptionBudget{})
				return err == nil
			}

			// Before the floor: the other PDB is there first, and holdfast never adds one.
			if err := c.Create(ctx, userPDB("early", "early", intstr.FromInt32(1))); err != nil {
				t.Fatal(err)
			}
			deploy("early")
			deploy("agent")
			waitPDB(ctx, t, c, ns, workload.Ref{Kind: v1alpha1.KindDeployment, Name: "agent"}, func(*policyv1.PodDisruptionBudget) bool { return true })
			if generated("early") {
				t.Fatal("holdfast generated a second PDB over pods another covers")
			}

			// After the floor: weaker is refused, as strict is admitted.
			err := c.Create(ctx, userPDB("all-at-once", "agent", intstr.FromString("100%")))
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "pdbFloor") {
				t.Fatalf("a PDB letting every agent go: %v, want 403 from the floor's rule", err)
			}
			var admitted, deferred, failed500 atomic.Int32
			drainCtx, stopDrain := context.WithCancel(ctx)
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for drainCtx.Err() == nil {
					var pods corev1.PodList
					if err := c.List(drainCtx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "agent"}); err != nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					for _, p := range pods.Items {
						if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
							continue
						}
						err := evictOnce(drainCtx, cs, ns, p.Name)
						switch {
						case err == nil:
							admitted.Add(1)
						case apierrors.IsTooManyRequests(err):
							deferred.Add(1)
						case apierrors.IsInternalError(err) || strings.Contains(err.Error(), "more than one PodDisruptionBudget"):
							failed500.Add(1)
							t.Errorf("evicting %s: %v", p.Name, err)
						case drainCtx.Err() == nil:
							t.Errorf("evicting %s: %v, want admitted or deferred", p.Name, err)
						}
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
			strict := userPDB("strict", "agent", intstr.FromInt32(1))
			if err := c.Create(ctx, strict); err != nil {
				t.Fatalf("a PDB as strict as the policy: %v", err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return !generated("agent"), nil
			}); err != nil {
				t.Fatal("the generated floor never stepped back")
			}
			time.Sleep(2 * time.Second)
			if err := c.Delete(ctx, strict); err != nil {
				t.Fatal(err)
			}
			waitPDB(ctx, t, c, ns, workload.Ref{Kind: v1alpha1.KindDeployment, Name: "agent"}, func(*policyv1.PodDisruptionBudget) bool { return true })
			time.Sleep(2 * time.Second)
			stopDrain()
			<-drained
			fmt.Printf("SCENARIO another-pdb weakerRefused=true evictionsAdmitted=%d deferred=%d answered500=%d\n",
				admitted.Load(), deferred.Load(), failed500.Load())
			if admitted.Load() == 0 {
				t.Error("the drain evicted nothing: it proved nothing")
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

func waitPDB(ctx context.Context, t *testing.T, c client.Client, ns string, w workload.Ref, ok func(*policyv1.PodDisruptionBudget) bool) *policyv1.PodDisruptionBudget {
	t.Helper()
	got := &policyv1.PodDisruptionBudget{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pdb.Name(w)}, got)
		return err == nil && ok(got), nil
	})
	if err != nil {
		t.Fatalf("PDB for %s %s: %+v: %v", w.Kind, w.Name, got.Spec, err)
	}
	return got
}

// onlyOwnEvictionEntry waits until the leader's configuration has no eviction entry but
// the policy's (named after the namespace here), so that a drain meets no other policy.
func onlyOwnEvictionEntry(ctx context.Context, t *testing.T, c client.Client, policy string) {
	t.Helper()
	var others []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: interception.Name(harness.WebhookConfigName)}, vwc); err != nil {
			return false, nil
		}
		others = nil
		for _, w := range vwc.Webhooks {
			if strings.HasSuffix(w.Name, "."+interception.TypeEviction) && !strings.HasPrefix(w.Name, policy+"-") {
				others = append(others, w.Name)
			}
		}
		return len(others) == 0, nil
	})
	if err != nil {
		t.Fatalf("other policies still intercept evictions: %v", others)
	}
}
