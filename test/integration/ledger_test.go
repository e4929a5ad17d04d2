//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestIdleLedgersSwept: holdfast deletes the eviction ledgers that have admitted no eviction
// for longer than their records are kept (an hour), and no other Lease. The suite sweeps
// every second.
func TestIdleLedgersSwept(t *testing.T) {
	ctx := context.Background()
	suffix := rand.String(6)
	long, now := metav1.NewMicroTime(time.Now().Add(-2*time.Hour)), metav1.NewMicroTime(time.Now())
	lease := func(name string, labelled bool, renewed metav1.MicroTime) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: holdfastNamespace, Name: name + "-" + suffix},
			Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}
		if labelled {
			l.Labels = map[string]string{"app.kubernetes.io/managed-by": "holdfast"}
		}
		return l
	}
	idle := lease("holdfast-evictions-idle", true, long)
	kept := []*coordinationv1.Lease{
		lease("holdfast-evictions-recent", true, now),
		lease("holdfast-evictions-not-labelled", false, long), // not holdfast's
		lease("some-other-lease", true, long),                 // not a ledger
	}
	for _, l := range append([]*coordinationv1.Lease{idle}, kept...) {
		if err := k8s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), l) })
	}

	eventually(t, "the idle ledger deleted", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(idle), &coordinationv1.Lease{}))
	})
	time.Sleep(2500 * time.Millisecond) // two more sweeps
	for _, l := range kept {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}); err != nil {
			t.Errorf("%s: %v; only idle ledgers may be deleted", l.Name, err)
		}
	}
}
