//go:build integration

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// The rollout scenarios, numbered as in webhooks/rollout's unit tests, through the real
// API server, with holdfast's leader keeping the revision journals. No workload
// controller runs here: the tests write the status a controller would.

// journalOf waits until the leader's journal of the workload has observed generation gen.
func journalOf(t *testing.T, kind v1alpha1.WorkloadKind, ns, name string, gen int64) *journal.Journal {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cm := &corev1.ConfigMap{}
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(kind, ns, name)}, cm)
		if err == nil {
			if j, err := journal.Decode(cm); err == nil && j.Generation >= gen {
				// …and until every replica's store has it: the webhook reads it from the cache.
				time.Sleep(200 * time.Millisecond)
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the journal of %s %s/%s never observed generation %d (%v)", kind, ns, name, gen, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func update(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Update(context.Background(), obj); err != nil {
		t.Fatalf("updating %s: %v", obj.GetName(), err)
	}
}

// deploymentStatus writes the status a Deployment controller would: updated of 3
// replicas run the current template, available are available, total in all.
func deploymentStatus(t *testing.T, d *appsv1.Deployment, updated, available, total int32) {
	t.Helper()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: total, UpdatedReplicas: updated,
		ReadyReplicas: available, AvailableReplicas: available}
	if err := k8s.Status().Update(context.Background(), d); err != nil {
		t.Fatalf("writing the status of %s: %v", d.Name, err)
	}
}

func TestInvariantsThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()

	t.Run("1: pause, edit, resume while the last revision rolls out", func(t *testing.T) {
		ns := createNamespace(t, nil)
		applyPolicy(t, ns, settlePolicy())
		d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
		if err := k8s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		deploymentStatus(t, d, 3, 3, 3)
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)

		d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:B"
		update(t, d) // A finished: B starts
		deploymentStatus(t, d, 1, 3, 4)
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)

		d.Spec.Paused = true
		update(t, d)
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:C"
		update(t, d) // staged while paused: allowed
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)

		d.Spec.Paused = false
		assertHoldfastDenied(t, k8s.Update(ctx, d), rollout.RuleSettle, "spec.template")

		// The way out the message names: roll back the staged edit, or wait.
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:B"
		update(t, d)
	})

	t.Run("1: a StatefulSet switched from OnDelete to RollingUpdate after an edit", func(t *testing.T) {
		ns := createNamespace(t, nil)
		p := settlePolicy()
		p.Spec.Exemptions.Users = []string{"release-manager"}
		applyPolicy(t, ns, p)
		grantRole(t, ns, "edit-statefulsets", []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "update"}}}, "release-manager")
		rm, _ := as(t, "release-manager")
		labels := map[string]string{"app": "konnectivity-server"}
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "konnectivity-server", Labels: labels},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/main:A"}}}}}}
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		status := func(updated, ready int32, current, next string) {
			s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 3, ReadyReplicas: ready, AvailableReplicas: ready,
				UpdatedReplicas: updated, CurrentRevision: current, UpdateRevision: next}
			if err := k8s.Status().Update(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		status(3, 3, "a", "a")
		journalOf(t, v1alpha1.KindStatefulSet, ns, s.Name, s.Generation)
		s.Spec.Template.Spec.Containers[0].Image = "registry.example/main:B"
		update(t, s)
		status(1, 2, "a", "b")
		journalOf(t, v1alpha1.KindStatefulSet, ns, s.Name, s.Generation)

		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		update(t, s)
		// Pods run A and B (the status counts them): C would be a third template, which
		// only an exempt requester stages (the operator's edit is refused, or told to
		// retry until the cache shows them).
		s.Spec.Template.Spec.Containers[0].Image = "registry.example/main:C"
		if err := rm.Update(ctx, s); err != nil {
			t.Fatalf("the exempt release manager stages C: %v", err)
		}
		journalOf(t, v1alpha1.KindStatefulSet, ns, s.Name, s.Generation)
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
		assertHoldfastDenied(t, k8s.Update(ctx, s), rollout.RuleSettle, "spec.template")
	})

	// spec.ordinals.start moved on an OnDelete StatefulSet with a staged template: kube
	// condemns the pods outside the new range and creates the new ordinals from the update
	// revision (updateStatefulSet, newVersionedStatefulSetPod), the staged template. A start.
	t.Run("2: an OnDelete StatefulSet renumbered onto its staged template", func(t *testing.T) {
		ns := createNamespace(t, nil)
		p := settlePolicy()
		p.Spec.Rules.MinInterval = &metav1.Duration{Duration: time.Hour}
		applyPolicy(t, ns, p)
		labels := map[string]string{"app": "etcd"}
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd", Labels: labels},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/main:A"}}}}}}
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		status := func(updated int32, current, next string) {
			s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
				CurrentReplicas: 3 - updated, UpdatedReplicas: updated, CurrentRevision: current, UpdateRevision: next}
			if err := k8s.Status().Update(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		status(3, "a", "a")
		journalOf(t, v1alpha1.KindStatefulSet, ns, s.Name, s.Generation)
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		update(t, s)
		s.Spec.Template.Spec.Containers[0].Image = "registry.example/main:B"
		update(t, s) // staged: no pod runs B
		status(0, "a", "b")
		journalOf(t, v1alpha1.KindStatefulSet, ns, s.Name, s.Generation)

		s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 3}
		assertHoldfastDenied(t, k8s.Update(ctx, s), rollout.RuleMinInterval, "spec.template")
		// A change that makes no new ordinal passes.
		s.Spec.Ordinals = nil
		s.Labels["tier"] = "storage"
		update(t, s)
	})

	t.Run("6: Recreate under a maxUnavailable of 1", func(t *testing.T) {
		ns := createNamespace(t, nil)
		p := utiltesting.MakeRolloutPolicy("strategy").Obj()
		p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		applyPolicy(t, ns, p)
		d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		assertHoldfastDenied(t, k8s.Create(ctx, d), rollout.RuleStrategy, "spec.strategy.type")
	})

	// Settle and minInterval in one policy, argsMatchReplicas in another.
	scalePolicies := func(t *testing.T, ns string) {
		revisions := settlePolicy()
		revisions.Spec.Rules.MinInterval = &metav1.Duration{Duration: time.Hour}
		revisions.Spec.Rules.RevertWindow = &metav1.Duration{Duration: time.Hour}
		applyPolicy(t, ns, revisions)
		applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	}

	t.Run("11: a coupled scale while rolling out, the rules in two policies", func(t *testing.T) {
		ns := createNamespace(t, nil)
		scalePolicies(t, ns)
		d := konnectivity(ns, 3, "3")
		if err := k8s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		deploymentStatus(t, d, 1, 2, 3) // rolling out
		d.Spec.Replicas = ptr.To[int32](5)
		d.Spec.Template.Spec.Containers[1].Args = []string{"--server-count=5"}
		update(t, d)
	})

	t.Run("12: an emergency scale back inside the revert window", func(t *testing.T) {
		ns := createNamespace(t, nil)
		scalePolicies(t, ns)
		d := konnectivity(ns, 3, "3")
		if err := k8s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		deploymentStatus(t, d, 3, 3, 3)
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
		d.Spec.Replicas = ptr.To[int32](5)
		d.Spec.Template.Spec.Containers[1].Args = []string{"--server-count=5"}
		update(t, d)
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
		d.Spec.Replicas = ptr.To[int32](3)
		d.Spec.Template.Spec.Containers[1].Args = []string{"--server-count=3"}
		update(t, d)
		// And the journal kept the revision's times through both scales (I4).
		j := journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
		if n := len(j.Revisions); n != 1 {
			t.Errorf("the journal recorded %d revisions for one template scaled twice: %+v", n, j.Revisions)
		}
	})
}

// TestJournalLifecycle: the leader rebuilds a journal deleted or edited by hand from the
// cluster's history, and removes a deleted workload's journal once no rule looks back
// that far.
func TestJournalLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("interval").Obj()
	p.Spec.Rules.MinInterval = &metav1.Duration{Duration: 2 * time.Second}
	applyPolicy(t, ns, p)
	d := utiltesting.MakeDeployment(ns, "kas").Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDeployment, ns, d.Name)}

	t.Run("deleted, it is rebuilt", func(t *testing.T) {
		if err := k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	})
	t.Run("edited by hand, it is read as absent and rebuilt", func(t *testing.T) {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, key, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"journal": `{"kind":"Deployment","allowEverything":true}`}
		update(t, cm)
		journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	})
	t.Run("its workload deleted, it is kept for the longest look back, then removed", func(t *testing.T) {
		if err := k8s.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		sawDeleted := false
		for {
			cm := &corev1.ConfigMap{}
			err := k8s.Get(ctx, key, cm)
			if apierrors.IsNotFound(err) {
				break
			}
			if err == nil {
				if j, err := journal.Decode(cm); err == nil && j.Deleted != nil {
					sawDeleted = true
				}
			}
			if time.Now().After(deadline) {
				t.Fatal(errors.Join(errors.New("the journal of a deleted workload was never removed"), err))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !sawDeleted {
			t.Error("the journal was removed without being kept after its workload's deletion")
		}
	})
}
