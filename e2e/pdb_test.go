//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
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
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "floor")
			namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
				s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
				s.PDB = &v1alpha1.PDBGeneration{Generate: true}
				// While holdfast is down, these evictions are admitted unchecked.
				s.FailurePolicy = ptr.To(v1alpha1.FailurePolicyIgnore)
			})
			d := utiltesting.MakeDeployment(ns, "agent").Replicas(agents).Obj()
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}}
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			tmpl := utiltesting.MakeDeployment(ns, "node-agent").Obj().Spec.Template
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			pods := waitReadyPods(ctx, t, c, ns, "agent", agents)

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
