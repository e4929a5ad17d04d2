//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// envtest runs no Deployment controller, so these tests write the ReplicaSets it would
// have made, and holdfast reads them from its cache as it would in a cluster.

// addRevision creates a ReplicaSet of d with d's current template, as revision n.
func addRevision(t *testing.T, d *appsv1.Deployment, n string) {
	t.Helper()
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "rev" + n
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-rev" + n, Labels: tmpl.Labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": n},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Template: *tmpl,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}},
	}
	if err := k8s.Create(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list appsv1.ReplicaSetList
		if err := cached.List(context.Background(), &list, client.InNamespace(d.Namespace), client.MatchingFields{informer.OwnerIndex: string(d.UID)}); err == nil {
			for _, got := range list.Items {
				if got.Name == rs.Name {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ReplicaSet %s never reached holdfast's cache", rs.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRolloutMinInterval(t *testing.T) {
	ctx := context.Background()
	ns := guardedNamespace(t, "interval", func(r *v1alpha1.RolloutRules) { r.MinInterval = &metav1.Duration{Duration: time.Hour} })
	d := createKas(t, ns)
	assertHoldfastDenied(t, k8s.Update(ctx, withImage(d, "registry.example/main:2")), rollout.RuleMinInterval, "spec.template")
}

func TestRolloutRevertWindow(t *testing.T) {
	ctx := context.Background()
	ns := guardedNamespace(t, "revert", revertWindow)
	b := rollTo(t, createKas(t, ns), "registry.example/main:B", "2")
	// B's rollout finishes (no Deployment controller runs here: its status says so). Going
	// back now is flapping (I3); while B still rolled out it would have been a cancel.
	b = rolledOut(t, b)
	back := withImage(b, "registry.example/main:1")
	assertHoldfastDenied(t, k8s.Update(ctx, back), rollout.RuleRevertWindow, "spec.template")
	if err := k8s.Update(ctx, withImage(b, "registry.example/main:C")); err != nil {
		t.Fatalf("B→C, a new template, must pass the revert window: %v", err)
	}
}

func TestRolloutStrategyAndAuditMode(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("strategy").Obj()
	p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{MinReadySeconds: ptr.To[int32](10)}
	applyPolicy(t, ns, p)
	assertHoldfastDenied(t, k8s.Create(ctx, utiltesting.MakeDeployment(ns, "kas").Obj()), rollout.RuleStrategy, "spec.minReadySeconds")
	ok := utiltesting.MakeDeployment(ns, "kas").Obj()
	ok.Spec.MinReadySeconds = 10
	if err := k8s.Create(ctx, ok); err != nil {
		t.Fatalf("a well-shaped Deployment: %v", err)
	}

	other := createNamespace(t, nil)
	audit := utiltesting.MakeRolloutPolicy("strategy-audit").Mode(v1alpha1.ModeAudit).Obj()
	audit.Spec.Rules.Strategy = p.Spec.Rules.Strategy
	applyPolicy(t, other, audit)
	warnings.take()
	if err := k8s.Create(ctx, utiltesting.MakeDeployment(other, "kas").Obj()); err != nil {
		t.Fatalf("Audit mode must admit: %v", err)
	}
	if w := warnings.take(); len(w) != 0 {
		t.Errorf("Audit mode must not warn, got %q", w)
	}
}

// rolledOut gives d's stored object the status of a finished rollout, as the Deployment
// controller would, and returns it.
func rolledOut(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	cur := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(d), cur); err != nil {
		t.Fatal(err)
	}
	r := ptr.Deref(cur.Spec.Replicas, 1)
	cur.Status = appsv1.DeploymentStatus{ObservedGeneration: cur.Generation, Replicas: r, UpdatedReplicas: r, ReadyReplicas: r, AvailableReplicas: r}
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatalf("marking %s rolled out: %v", cur.Name, err)
	}
	return cur
}

// TestAdoptableHistoryReadsItsPods: what a re-created Deployment would adopt (the
// ReplicaSets an orphaning delete left that its spec.selector matches) is read with their pods, which date the rollout's
// last progress: a pod that became Ready a moment ago is progress, whatever the ReplicaSet's
// age. A pod of another workload's ReplicaSet with the same labels is not its activity.
func TestAdoptableHistoryReadsItsPods(t *testing.T) {
	ctx := context.Background()
	ns := guardedNamespace(t, "adoptable", func(r *v1alpha1.RolloutRules) { r.Settle = &v1alpha1.SettleRule{} })
	d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
	rs := func(name string, owner *appsv1.Deployment) *appsv1.ReplicaSet {
		tmpl := d.Spec.Template.DeepCopy()
		tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = name
		s := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tmpl.Labels,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Template: *tmpl, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}}}
		if owner != nil {
			s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		}
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	pod := func(name string, of *appsv1.ReplicaSet, ready time.Time) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: of.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(of, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: of.Spec.Template.Spec}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}
		if err := k8s.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	orphaned := rs("kas-orphaned", nil)
	other := utiltesting.MakeDeployment(ns, "other").Obj()
	if err := k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	theirs := rs("other-rs", other)
	readyAt := time.Now().Add(time.Minute).Truncate(time.Second)
	pod("kas-orphaned-1", orphaned, readyAt)
	pod("other-rs-1", theirs, readyAt.Add(time.Hour))

	// Re-created with a label its template did not have: kube's Deployment controller adopts
	// by spec.selector, whatever the template's other labels, and so does what holdfast reads.
	d.Spec.Template.Labels = map[string]string{"app": "kas", "track": "v2"} // the selector's map stays as it was
	w, err := workload.From(d)
	if err != nil {
		t.Fatal(err)
	}
	var h history.History
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h, err = history.ReadAdoptable(ctx, cached, w); err == nil && len(h.Revisions) == 1 && h.LastActivity.Equal(readyAt) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ReadAdoptable = %d revisions, last activity %v (%v); want the orphaned ReplicaSet and its pod's Ready at %v", len(h.Revisions), h.LastActivity, err, readyAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
