//go:build integration

package integration

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/charts"
)

// TestKustomizeApplies sends config/default to the real API server (server-side dry run).
// That it installs the chart's CRDs, RBAC and webhook rules is charts'
// TestChartAgreesWithKustomize, which `make verify` runs.
func TestKustomizeApplies(t *testing.T) {
	k, err := charts.Kustomize("default")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, u := range k {
		kinds[u.GetKind()] = true
		if u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" {
			continue // both already exist in the test API server
		}
		// Create writes the server's defaulted answer into its argument: send a copy.
		u = u.DeepCopy()
		apart(u)
		if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, want := range []string{"Deployment", "ValidatingWebhookConfiguration", "ClusterRole", "Service"} {
		if !kinds[want] {
			t.Errorf("config/default installs no %s", want)
		}
	}
}
