//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/check"
)

// TestCheckAgreesWithTheWebhook: `holdfast check` on the sample policy and a change gives
// exactly the denial the API server returns from holdfast's webhook for the same change,
// and allows what it admits.
func TestCheckAgreesWithTheWebhook(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, map[string]string{"holdfast.dev/hosted-control-plane": "true"})
	policies, err := check.ReadObjects([]string{"../../config/samples/rolloutpolicy_konnectivity_server_count.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := policies[0].Object.(*v1alpha1.RolloutPolicy)
	if err := k8s.Create(ctx, p.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	eventually(t, "the sample policy in holdfast's cache", func() bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.RolloutPolicy{}) == nil
	})

	old, scaled := konnectivity(ns, 3, "3"), konnectivity(ns, 5, "3")
	namespace := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	results, err := check.Evaluate([]v1alpha1.RolloutPolicy{*p}, []check.Document{{Object: namespace}, {Object: old.DeepCopy()}, {Object: scaled.DeepCopy()}}, nil,
		authenticationv1.UserInfo{}, time.Now())
	if err != nil || len(results) != 1 {
		t.Fatalf("check: %v, %d results", err, len(results))
	}
	var messages []string
	for _, v := range results[0].Violations {
		messages = append(messages, v.Message)
	}

	if err := k8s.Create(ctx, old); err != nil {
		t.Fatalf("the webhook refused the old object: %v", err)
	}
	scaled.ResourceVersion = old.ResourceVersion
	err = k8s.Update(ctx, scaled)
	want := `admission webhook "rollout.holdfast.dev" denied the request: ` + strings.Join(messages, "; ")
	if err == nil || results[0].Action != "deny" || err.Error() != want {
		t.Errorf("the webhook answered\n  %v\nholdfast check (%s) says\n  %s", err, results[0].Action, want)
	}
}
