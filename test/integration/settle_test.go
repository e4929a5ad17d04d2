//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// envtest runs no controller-manager, so a Deployment's status stays where the tests put
// it: a new Deployment is still rolling out (observedGeneration 0 < generation 1).

func settlePolicy() *v1alpha1.RolloutPolicy {
	p := utiltesting.MakeRolloutPolicy("settle").Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
	return p
}

func withImage(d *appsv1.Deployment, image string) *appsv1.Deployment {
	c := d.DeepCopy()
	c.Spec.Template.Spec.Containers[0].Image = image
	return c
}

func TestRolloutSettle(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	applyPolicy(t, ns, settlePolicy())
	d := utiltesting.MakeDeployment(ns, "kube-apiserver").Replicas(3).Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}

	t.Run("a template change while rolling out is denied", func(t *testing.T) {
		assertHoldfastDenied(t, k8s.Update(ctx, withImage(d, "registry.example/main:2")), rollout.RuleSettle, "spec.template")
	})
	t.Run("a dry run is evaluated the same", func(t *testing.T) {
		assertHoldfastDenied(t, k8s.Update(ctx, withImage(d, "registry.example/main:2"), client.DryRunAll), rollout.RuleSettle, "spec.template")
	})
	t.Run("a change that touches no template is allowed", func(t *testing.T) {
		c := d.DeepCopy()
		c.Labels["team"] = "platform"
		if err := k8s.Update(ctx, c); err != nil {
			t.Fatalf("label change: %v", err)
		}
		d = c
	})
	t.Run("a relabel out of the selector with a template change is denied", func(t *testing.T) {
		other := createNamespace(t, nil)
		p := settlePolicy()
		p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "control-plane"}}
		applyPolicy(t, other, p)
		e := utiltesting.MakeDeployment(other, "kas").Label("tier", "control-plane").Obj()
		if err := k8s.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		moved := withImage(e, "registry.example/main:2")
		moved.Labels["tier"] = "elsewhere"
		assertHoldfastDenied(t, k8s.Update(ctx, moved), rollout.RuleSettle, "spec.template")
	})
	// kube's ProgressDeadlineExceeded is sticky (DeploymentTimedOut in
	// pkg/controller/deployment/util keeps TimedOutReason until the next progress):
	// progressDeadlineSeconds lowered to 1 s, then raised to 600 s, leaves the condition on a
	// rollout that has not gone 600 s without progress. That is no stall.
	t.Run("a sticky stall under a raised deadline opens nothing", func(t *testing.T) {
		lowered := d.DeepCopy()
		lowered.Spec.ProgressDeadlineSeconds = ptr.To[int32](1)
		if err := k8s.Update(ctx, lowered); err != nil {
			t.Fatalf("lowering the deadline: %v", err)
		}
		raised := lowered.DeepCopy()
		raised.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
		if err := k8s.Update(ctx, raised); err != nil {
			t.Fatalf("raising the deadline: %v", err)
		}
		raised.Status = timedOut(raised)
		if err := k8s.Status().Update(ctx, raised); err != nil {
			t.Fatalf("marking the rollout stalled: %v", err)
		}
		// Until the journal has seen this generation, the rollout counts as just started.
		journalOf(t, v1alpha1.KindDeployment, ns, raised.Name, raised.Generation)
		assertHoldfastDenied(t, k8s.Update(ctx, withImage(raised, "registry.example/main:3")), rollout.RuleSettle, "spec.template")
		d = raised
	})
	t.Run("a fix to a stalled release is accepted", func(t *testing.T) {
		// A deadline (and stallAfter) of 1 s that has passed with no progress on record.
		other := createNamespace(t, nil)
		p := settlePolicy()
		p.Spec.Rules.Settle.StallAfter = &metav1.Duration{Duration: time.Second}
		applyPolicy(t, other, p)
		e := utiltesting.MakeDeployment(other, "kube-apiserver").Replicas(3).Obj()
		e.Spec.ProgressDeadlineSeconds = ptr.To[int32](1)
		if err := k8s.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		e.Status = timedOut(e)
		if err := k8s.Status().Update(ctx, e); err != nil {
			t.Fatalf("marking the rollout stalled: %v", err)
		}
		// The webhook reads oldObject from the request, so the fix sees the stalled status at once.
		fix := withImage(e, "registry.example/main:fixed")
		if err := k8s.Update(ctx, fix); err != nil {
			t.Fatalf("the fix of a stalled release must be accepted: %v", err)
		}
	})
}

// timedOut is d's status as kube's deployment controller writes it once the rollout passed
// its progress deadline: every pod updated, none available, Progressing False.
func timedOut(d *appsv1.Deployment) appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 0,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
}

func TestRolloutScaleSubresource(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	d := konnectivity(ns, 3, "3")
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitCached(t, d)

	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
	err := k8s.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale))
	assertHoldfastDenied(t, err, rollout.RuleArgsMatchReplicas, "spec.template.spec.containers[1].args[0]")

	// A workload without the flag's container scales freely.
	web := utiltesting.MakeDeployment(ns, "web").Replicas(1).Obj()
	if err := k8s.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	waitCached(t, web)
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	if err := k8s.SubResource("scale").Update(ctx, web, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scaling a workload without the container: %v", err)
	}
	got := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), got); err != nil || *got.Spec.Replicas != 4 {
		t.Fatalf("replicas = %v (%v), want 4", ptr.Deref(got.Spec.Replicas, 0), err)
	}
}

// waitCached waits until holdfast's cache holds the Deployment, as the scale path reads it there.
func waitCached(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for cached.Get(context.Background(), client.ObjectKeyFromObject(d), &appsv1.Deployment{}) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s never reached holdfast's cache", d.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
