//go:build integration

package integration

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/charts"
)

// TestChartAppliesToTheAPIServer sends every object the chart renders to the real API
// server (server-side dry run): each must pass its validation, the webhook configuration's
// matchConditions and the RBAC rules included.
func TestChartAppliesToTheAPIServer(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":         nil,
		"with the samples": {"samples": map[string]any{"enabled": true}},
		"fail closed, one replica": {"replicaCount": 1, "webhook": map[string]any{
			"rollout": map[string]any{"failurePolicy": "Fail"}, "eviction": map[string]any{"failurePolicy": "Fail"}}},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := charts.Render(holdfastNamespace, values)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range objs {
				if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}
