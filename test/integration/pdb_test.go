//go:build integration

package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/controller"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// eventually polls cond for up to 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func generatingPolicy(t *testing.T, ns string, maxUnavailable intstr.IntOrString) *v1alpha1.DisruptionPolicy {
	t.Helper()
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-pdb"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: &maxUnavailable, PDB: &v1alpha1.PDBGeneration{Generate: true},
			Targets: v1alpha1.PodTargets{NamespaceSelector: namespaceNamed(ns),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "agent"}}}}}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
	return p
}

// pdbOf returns the workload's generated PDB, or nil.
func pdbOf(t *testing.T, ns, kind, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	p := &policyv1.PodDisruptionBudget{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pdb.Name(workload.Ref{Kind: v1alpha1.WorkloadKind(kind), Name: name})}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func agentDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	d := utiltesting.MakeDeployment(ns, name).Replicas(replicas).Obj()
	d.Spec.Template.Labels["tier"] = "agent"
	return d
}

func setReplicas(t *testing.T, d *appsv1.Deployment, n int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(n)
		return k8s.Update(context.Background(), d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPDBGeneratedForDeployment(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	policy := generatingPolicy(t, ns, intstr.FromInt32(1))
	d := agentDeployment(ns, "agent", 3)
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}

	eventually(t, "PDB created", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	got := pdbOf(t, ns, "Deployment", "agent")
	if got.Spec.MaxUnavailable == nil || got.Spec.MaxUnavailable.IntValue() != 1 || got.Spec.MinAvailable != nil ||
		*got.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow || got.Spec.Selector.MatchLabels["app"] != "agent" {
		t.Errorf("spec = %+v", got.Spec)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != d.UID || got.Labels[pdb.PolicyLabel] != policy.Name {
		t.Errorf("owner %+v, labels %v", got.OwnerReferences, got.Labels)
	}

	t.Run("a hand edit is refused under Enforce, and reverted under Warn", func(t *testing.T) {
		got.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(3))
		if err := k8s.Update(ctx, got); !apierrors.IsForbidden(err) {
			t.Fatalf("editing the generated floor under Enforce: %v, want 403", err)
		}
		setDisruptionMode(t, policy, v1alpha1.ModeWarn)
		defer setDisruptionMode(t, policy, v1alpha1.ModeEnforce)
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
				return err
			}
			got.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(3))
			return k8s.Update(ctx, got)
		}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "edit reverted", func() bool {
			p := pdbOf(t, ns, "Deployment", "agent")
			return p != nil && p.Spec.MaxUnavailable.IntValue() == 1
		})
	})
	t.Run("scaling 3→1 removes it, 1→3 brings it back", func(t *testing.T) {
		setReplicas(t, d, 1)
		eventually(t, "PDB removed below minReplicas", func() bool { return pdbOf(t, ns, "Deployment", "agent") == nil })
		setReplicas(t, d, 3)
		eventually(t, "PDB back", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	})
	t.Run("the policy's status counts it", func(t *testing.T) {
		eventually(t, "status", func() bool {
			p := &v1alpha1.DisruptionPolicy{}
			return k8s.Get(ctx, client.ObjectKeyFromObject(policy), p) == nil &&
				p.Status.WorkloadsSelected == 1 && p.Status.PDBsManaged == 1 && p.Status.Conflicts == 0
		})
	})
	t.Run("a user PDB over the same pods makes holdfast step back", func(t *testing.T) {
		user := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "user"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}
		if err := k8s.Create(ctx, user); err != nil {
			t.Fatal(err)
		}
		eventually(t, "holdfast's PDB deleted", func() bool { return pdbOf(t, ns, "Deployment", "agent") == nil })
		eventually(t, "PDBConflict reported, the floor held (the user PDB is as strict)", func() bool {
			p := &v1alpha1.DisruptionPolicy{}
			return k8s.Get(ctx, client.ObjectKeyFromObject(policy), p) == nil && p.Status.Conflicts == 1 &&
				meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionPDBConflict) &&
				meta.IsStatusConditionFalse(p.Status.Conditions, v1alpha1.ConditionFloorWeakened)
		})
		// The tenant's attack: the user PDB lets every pod go. In Enforce the floor's
		// webhook refuses it; under Warn (or while holdfast is down) it is stored, holdfast
		// still generates no second PDB (kube would answer 500 to every eviction), and says
		// the floor is weaker.
		weaken := func() error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(user), user); err != nil {
					return err
				}
				user.Spec.MinAvailable, user.Spec.MaxUnavailable = nil, ptr.To(intstr.FromString("100%"))
				return k8s.Update(ctx, user)
			})
		}
		if err := weaken(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy.Name) {
			t.Fatalf("weakening the user PDB under an enforcing policy: %v, want 403 naming the policy", err)
		}
		setDisruptionMode(t, policy, v1alpha1.ModeWarn)
		warnings.take()
		if err := weaken(); err != nil {
			t.Fatal(err)
		}
		if w := warnings.take(); len(w) == 0 || !strings.Contains(strings.Join(w, " "), "allows 3 of its 3 pods") {
			t.Errorf("weakening it under Warn warned %q, want the weakness named", w)
		}
		eventually(t, "FloorWeakened reported, naming the PDB and the way out", func() bool {
			p := &v1alpha1.DisruptionPolicy{}
			if k8s.Get(ctx, client.ObjectKeyFromObject(policy), p) != nil {
				return false
			}
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionFloorWeakened)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonWeakerPDB &&
				strings.Contains(c.Message, ns+"/user") && strings.Contains(c.Message, "allows 3 of its 3 pods")
		})
		eventually(t, "a FloorWeakened Event on the user PDB", func() bool {
			var evs eventsv1.EventList
			if k8s.List(ctx, &evs, client.InNamespace(ns)) != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == "FloorWeakened" && e.Regarding.Kind == "PodDisruptionBudget" && e.Regarding.Name == user.Name {
					return true
				}
			}
			return false
		})
		if pdbOf(t, ns, "Deployment", "agent") != nil {
			t.Error("a second PDB over pods the user PDB covers")
		}
		if err := k8s.Delete(ctx, user); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PDB back once the user PDB is gone", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	})
	t.Run("a policy that stops selecting the workload takes its PDB away", func(t *testing.T) {
		setSelector := func(labels map[string]string) {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				p := &v1alpha1.DisruptionPolicy{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), p); err != nil {
					return err
				}
				p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: labels}
				return k8s.Update(ctx, p)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		setSelector(map[string]string{"tier": "other"})
		eventually(t, "PDB removed", func() bool { return pdbOf(t, ns, "Deployment", "agent") == nil })
		setSelector(map[string]string{"tier": "agent"})
		eventually(t, "PDB back", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	})
	t.Run("deleting the policy removes its PDBs through the finalizer", func(t *testing.T) {
		p := &v1alpha1.DisruptionPolicy{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), p); err != nil || !slices.Contains(p.Finalizers, controller.PDBFinalizer) {
			t.Fatalf("finalizer missing: %v %v", p.Finalizers, err)
		}
		if err := k8s.Delete(ctx, policy); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PDB removed", func() bool { return pdbOf(t, ns, "Deployment", "agent") == nil })
		eventually(t, "policy gone", func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.DisruptionPolicy{}))
		})
	})
}

func TestPDBForDaemonSetFollowsDesiredCount(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	generatingPolicy(t, ns, intstr.FromInt32(1))
	tmpl := agentDeployment(ns, "node-agent", 1).Spec.Template
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "node-agent"}}, Template: tmpl}}
	if err := k8s.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	setDesired := func(n int32) {
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: n, CurrentNumberScheduled: n}
		if err := k8s.Status().Update(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	setDesired(6)
	eventually(t, "minAvailable 5 of 6", func() bool {
		p := pdbOf(t, ns, "DaemonSet", "node-agent")
		return p != nil && p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntValue() == 5 && p.Spec.MaxUnavailable == nil
	})
	setDesired(4)
	eventually(t, "minAvailable 3 of 4", func() bool {
		p := pdbOf(t, ns, "DaemonSet", "node-agent")
		return p != nil && p.Spec.MinAvailable.IntValue() == 3
	})
}

func TestPDBNotGeneratedOverAnotherWorkloadsPods(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	generatingPolicy(t, ns, intstr.FromInt32(1))
	wide := agentDeployment(ns, "wide", 3)
	wide.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "agent"}}
	if err := k8s.Create(ctx, wide); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PDB for the only workload", func() bool { return pdbOf(t, ns, "Deployment", "wide") != nil })
	if err := k8s.Create(ctx, agentDeployment(ns, "other", 3)); err != nil {
		t.Fatal(err)
	}
	// wide's selector (tier=agent) also covers other's pods: its PDB must go.
	eventually(t, "overlapping PDB removed", func() bool { return pdbOf(t, ns, "Deployment", "wide") == nil })
	eventually(t, "the narrow workload keeps its own", func() bool { return pdbOf(t, ns, "Deployment", "other") != nil })
}

// TestPDBNotGeneratedOverPodsAnotherPDBCoversByTheirOwnLabels: kube matches a PDB against
// pods, which carry labels their template does not (pod-template-hash). A PDB on such a
// label covers the live pods, so holdfast keeps no second PDB over them (kube would answer
// 500 to every eviction); once the pod no longer carries it, the floor comes back.
func TestPDBNotGeneratedOverPodsAnotherPDBCoversByTheirOwnLabels(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	generatingPolicy(t, ns, intstr.FromInt32(1))
	d := agentDeployment(ns, "agent", 3)
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PDB created", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-5d8f-x",
		Labels: map[string]string{"app": "agent", "tier": "agent", "pod-template-hash": "5d8f"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:a"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	hashed := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hash"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod-template-hash": "5d8f"}}}}
	if err := k8s.Create(ctx, hashed); err != nil {
		t.Fatal(err)
	}
	eventually(t, "holdfast's PDB deleted: the other covers a live pod", func() bool { return pdbOf(t, ns, "Deployment", "agent") == nil })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		pod.Labels["pod-template-hash"] = "0000"
		return k8s.Update(ctx, pod)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the floor back once no pod carries the label", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
}

// setDisruptionMode changes a DisruptionPolicy's mode and waits until it is in force.
func setDisruptionMode(t *testing.T, p *v1alpha1.DisruptionPolicy, mode v1alpha1.Mode) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Mode = mode
		return k8s.Update(context.Background(), p)
	})
	if err != nil {
		t.Fatal(err)
	}
	intercepted(t, p)
}

// TestWeakerPDBRefusedAtAdmission: through the real API server, a PodDisruptionBudget that
// would cover the pods of a workload an enforcing policy generates a floor for is refused
// when it is weaker than the policy (naming the policy, the rule and the weakness), and
// admitted when it is at least as strict (the generated floor then steps back); an update
// that weakens it is refused, one that makes it stricter is admitted; a PDB over pods no
// policy guards is never judged.
func TestWeakerPDBRefusedAtAdmission(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	policy := generatingPolicy(t, ns, intstr.FromInt32(1))
	if err := k8s.Create(ctx, agentDeployment(ns, "agent", 4)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PDB created", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	// holdfast's own floor is written by holdfast only: an edit that weakens it is refused
	// (else dropping its label at once would keep the edit as someone else's PDB).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		floor := pdbOf(t, ns, "Deployment", "agent")
		floor.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		return k8s.Update(ctx, floor)
	})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "generated floor") {
		t.Fatalf("weakening holdfast's generated PDB in place: %v, want 403", err)
	}
	user := func(name string, sel map[string]string, maxUnavailable intstr.IntOrString) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: sel}}}
	}
	agentPods := map[string]string{"app": "agent"}
	err = k8s.Create(ctx, user("all-at-once", agentPods, intstr.FromString("100%")))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy.Name) || !strings.Contains(err.Error(), "pdbFloor") ||
		!strings.Contains(err.Error(), "allows 4 of its 4 pods down at once, more than the policy's 1") {
		t.Fatalf("a PDB letting every pod go: %v, want 403 naming the policy, the rule and the weakness", err)
	}
	if err := k8s.Create(ctx, user("elsewhere", map[string]string{"app": "unguarded"}, intstr.FromString("100%"))); err != nil {
		t.Fatalf("a PDB over pods no policy guards: %v", err)
	}
	strict := user("strict", agentPods, intstr.FromInt32(1))
	if err := k8s.Create(ctx, strict); err != nil {
		t.Fatalf("a PDB as strict as the policy: %v", err)
	}
	eventually(t, "the generated floor steps back", func() bool { return pdbOf(t, ns, "Deployment", "agent") == nil })
	set := func(mut func(*policyv1.PodDisruptionBudgetSpec)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(strict), strict); err != nil {
				return err
			}
			mut(&strict.Spec)
			return k8s.Update(ctx, strict)
		})
	}
	if err := set(func(s *policyv1.PodDisruptionBudgetSpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(2)) }); !apierrors.IsForbidden(err) {
		t.Fatalf("weakening it to 2 at once: %v, want 403", err)
	}
	if err := set(func(s *policyv1.PodDisruptionBudgetSpec) {
		s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	}); err != nil {
		t.Fatalf("AlwaysAllow against a policy whose unhealthy pods may go anyway (its default): %v", err)
	}
	if err := set(func(s *policyv1.PodDisruptionBudgetSpec) {
		s.MaxUnavailable, s.MinAvailable = nil, ptr.To(intstr.FromInt32(4))
	}); err != nil {
		t.Fatalf("making it stricter: %v", err)
	}
}

// TestPDBGeneratorRestart runs a second, freshly started generator beside the first, as
// after a restart or a leader change: the PDBs stay one per workload.
func TestPDBGeneratorRestart(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	generatingPolicy(t, ns, intstr.FromInt32(1))
	for _, name := range []string{"a", "b"} {
		if err := k8s.Create(ctx, agentDeployment(ns, name, 3)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "PDBs created", func() bool { return pdbOf(t, ns, "Deployment", "a") != nil && pdbOf(t, ns, "Deployment", "b") != nil })

	// The first generator's controllers live in this process too: skip the name check.
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{Scheme: informer.NewScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range workload.Kinds() {
		if err := (&controller.PDBGenerator{Client: mgr.GetClient(), Kind: kind, Clock: clock.RealClock{}}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		t.Fatal("second generator's caches did not sync")
	}
	time.Sleep(2 * time.Second) // let it reconcile every workload
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var list policyv1.PodDisruptionBudgetList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d PDBs after a second generator ran, want 2 (one per workload)", len(list.Items))
	}
}
