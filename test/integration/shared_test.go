//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/interception"
)

// TestSharedBudgetBothWays: a RolloutPolicy sharing a DisruptionPolicy's budget refuses a
// rollout of a workload whose pods' eviction is within the cooldown, and while the workload
// rolls out, its pods' evictions are deferred (429).
func TestSharedBudgetBothWays(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Minute} })
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}, SharedBudget: &v1alpha1.SharedBudget{DisruptionPolicy: ns + "-agents"}}}}
	applyPolicy(t, ns, p)
	pods := agentGroup(t, ns, 3)
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, d); err != nil {
		t.Fatal(err)
	}
	deploymentStatus(t, d, 3, 3, 3)
	journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)

	// A drain takes one agent: the rollout waits for the cooldown it shares.
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}
	b := withImage(d, "registry.example/main:B")
	err := k8s.Update(ctx, b)
	assertHoldfastDenied(t, err, budget.RuleSharedBudget, "spec.template")
	if !strings.Contains(err.Error(), "cooldown of 1m0s") {
		t.Errorf("the refusal does not say it waits for the cooldown: %v", err)
	}

	// The other way: while the workload rolls out, its agents' evictions wait.
	ns2 := createNamespace(t, nil)
	disruptionPolicy(t, ns2, nil)
	p2 := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}, SharedBudget: &v1alpha1.SharedBudget{DisruptionPolicy: ns2 + "-agents"}}}}
	applyPolicy(t, ns2, p2)
	pods = agentGroup(t, ns2, 3)
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns2, Name: "agent"}, d); err != nil {
		t.Fatal(err)
	}
	deploymentStatus(t, d, 3, 3, 3)
	journalOf(t, v1alpha1.KindDeployment, ns2, d.Name, d.Generation)
	b = withImage(d, "registry.example/main:B")
	update(t, b) // admitted: no eviction in the group
	deploymentStatus(t, b, 1, 3, 4)
	journalOf(t, v1alpha1.KindDeployment, ns2, b.Name, b.Generation)
	err = evict(t, ns2, pods[1].Name, false)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting an agent while its Deployment rolls out: %v, want 429", err)
	}
	if msg, ok := deniedBy(err, interception.TypeEviction); !ok || !strings.Contains(msg, "/"+"sharedBudget]") || !strings.Contains(msg, "rolling out") {
		t.Errorf("the deferral %q does not name the shared budget and the rollout", err)
	}
	// The rollout finishes: the drain goes on.
	deploymentStatus(t, b, 3, 3, 3)
	eventually(t, "the eviction admitted once the rollout finished", func() bool { return evict(t, ns2, pods[1].Name, true) == nil })
}
