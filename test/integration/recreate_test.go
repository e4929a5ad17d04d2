//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/budget"
)

// TestReCreatedWorkloadKeepsItsGroup: through the real API server, a Deployment deleted
// orphaning its ReplicaSet (as the garbage collector orphans: the owner reference
// removed) and created again under its name, before its controller adopts the
// ReplicaSet, is the same group: an eviction inside the cooldown of one admitted before
// the delete is deferred. The orphaned ReplicaSet's pod belongs to the Deployment kube
// adopts it into, and the new Deployment's group reads the deleted one's ledger.
func TestReCreatedWorkloadKeepsItsGroup(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, anyNumberAnHourApart)
	pods := agentGroup(t, ns, 3)
	old := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, old); err != nil {
		t.Fatal(err)
	}
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}

	// The orphaning delete, as kube's garbage collector carries it out.
	if err := k8s.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent-1"}, rs); err != nil {
		t.Fatal(err)
	}
	// kube's ReplicaSets carry their template's labels, which the Deployment's selector
	// adopts them by (ClaimReplicaSets).
	rs.OwnerReferences, rs.Labels = nil, old.Spec.Template.Labels
	if err := k8s.Update(ctx, rs); err != nil {
		t.Fatal(err)
	}
	again := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Labels: old.Labels}, Spec: old.Spec}
	if err := k8s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again.UID == old.UID {
		t.Fatal("the re-created Deployment has the deleted one's UID")
	}
	// Wait until holdfast's cache shows the new Deployment and the orphaned ReplicaSet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var d appsv1.Deployment
		var seen appsv1.ReplicaSet
		if cached.Get(ctx, client.ObjectKeyFromObject(again), &d) == nil && d.UID == again.UID &&
			cached.Get(ctx, client.ObjectKeyFromObject(rs), &seen) == nil && len(seen.OwnerReferences) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("holdfast's cache never showed the re-created Deployment over its orphaned ReplicaSet")
		}
		time.Sleep(20 * time.Millisecond)
	}

	err := evict(t, ns, pods[1].Name, false)
	assertDeferred(t, err)
	if !strings.Contains(err.Error(), "/cooldown]") {
		t.Errorf("deferral %q does not name the cooldown rule", err)
	}
	// The deleted Deployment's ledger holds the first eviction, named by its workload.
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, budget.GroupKey(holdfastNamespace, old.UID), lease); err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[budget.WorkloadAnnotation]; got != "Deployment/"+ns+"/agent" {
		t.Errorf("the deleted Deployment's ledger names %q", got)
	}
}
