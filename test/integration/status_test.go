//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// waitStatus waits until the policy's status satisfies ok, and returns it.
func waitStatus(t *testing.T, name string, ok func(s v1alpha1.RolloutPolicyStatus) bool) v1alpha1.RolloutPolicyStatus {
	t.Helper()
	p := &v1alpha1.RolloutPolicy{}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, p); err == nil && ok(p.Status) {
			return p.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s never got there: %+v", name, p.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRolloutPolicyStatus(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("status").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	applyPolicy(t, ns, p)

	waitStatus(t, p.Name, func(s v1alpha1.RolloutPolicyStatus) bool {
		return s.WorkloadsMatched == 0 && meta.IsStatusConditionTrue(s.Conditions, v1alpha1.ConditionReady)
	})
	for _, name := range []string{"a", "b"} {
		if err := k8s.Create(ctx, utiltesting.MakeDeployment(ns, name).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	s := waitStatus(t, p.Name, func(s v1alpha1.RolloutPolicyStatus) bool { return s.WorkloadsMatched == 2 })
	if s.ObservedGeneration == 0 {
		t.Errorf("observedGeneration not set: %+v", s)
	}

	bad := utiltesting.MakeRolloutPolicy("bad-selector").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	applyPolicy(t, ns, bad)
	bad.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	// The status controller writes too: re-read on conflict, as any client would. holdfast
	// and the CRDs refuse such a selector; one written before the CRDs did, while holdfast
	// did not answer, is in force.
	var err error
	withPreviousCRDs(t, func() {
		withoutPolicyValidation(t, func() {
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				got := &v1alpha1.RolloutPolicy{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(bad), got); err != nil {
					return err
				}
				got.Spec = bad.Spec
				return k8s.Update(ctx, got)
			})
		})
	})
	if err != nil {
		t.Fatalf("the previous CRDs accept a selector kube cannot parse: %v", err)
	}
	waitStatus(t, bad.Name, func(s v1alpha1.RolloutPolicyStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidSelector
	})
}
