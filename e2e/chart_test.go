//go:build e2e

package e2e

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/charts"
)

// TestChartOnKwok sends every object of the rendered chart, samples included, to the kwok
// cluster's API server as a server-side dry run: each must be accepted, the webhook
// configuration with its matchConditions included.
func TestChartOnKwok(t *testing.T) {
	f := features.New("chart").
		Assess("every rendered object is accepted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			objs, err := charts.Render(holdfastNamespace, map[string]any{"samples": map[string]any{"enabled": true}})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range objs {
				if err := c.Create(ctx, u, client.DryRunAll); err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
