//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestBackgroundAudit: the leader evaluates the workloads a policy selects as they stand,
// counts those that break its request-free rules in the policy's status, and in Audit
// mode puts a PolicyViolation Event on each.
func TestBackgroundAudit(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("audit").Mode(v1alpha1.ModeAudit).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	applyPolicy(t, ns, p)
	bad := konnectivity(ns, 3, "1") // admitted: Audit mode
	if err := k8s.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	good := utiltesting.MakeDeployment(ns, "web").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
	if err := k8s.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy counts one violating workload", func() bool {
		got := &v1alpha1.RolloutPolicy{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(p), got) == nil && ptr.Deref(got.Status.Violations, -1) == 1
	})
	eventually(t, "a PolicyViolation Event on the violating Deployment", func() bool {
		var evs eventsv1.EventList
		if k8s.List(ctx, &evs, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "PolicyViolation" && e.Regarding.Name == bad.Name && strings.Contains(e.Note, "--server-count=1") {
				return true
			}
			if e.Reason == "PolicyViolation" && e.Regarding.Name == good.Name {
				t.Errorf("an Event on the Deployment that breaks no rule: %s", e.Note)
			}
		}
		return false
	})
}
