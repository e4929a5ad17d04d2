//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// TestKamajiStorm replays the field's operator storm with and without holdfast.
func TestKamajiStorm(t *testing.T) {
	f := features.New("kamaji storm").
		Assess("without holdfast every generation rolls out", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "storm-off")
			res, err := harness.RunStorm(ctx, c, ns, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("SCENARIO kamaji-storm guard=off revisions=%d peakPods=%d\n", res.Revisions, res.PeakPods)
			t.Logf("peak pods including terminating ones: %d", res.PeakAll)
			if res.Revisions != 4 {
				t.Errorf("revisions = %d, want 4: the unguarded storm is the baseline", res.Revisions)
			}
			return ctx
		}).
		Assess("with holdfast the storm settles into at most two revisions", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "storm-on")
			policyIn(ctx, t, c, ns, nil, func(r *v1alpha1.RolloutRules) {
				r.Settle = &v1alpha1.SettleRule{}
				r.RevertWindow = &metav1.Duration{Duration: 10 * time.Minute}
				// So that GEN1 finishing early cannot let GEN3 in before GEN4 (I2).
				r.MinInterval = &metav1.Duration{Duration: 10 * time.Second}
			})
			res, err := harness.RunStorm(ctx, c, ns, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			_, simRes := simulated(t, "operator-storm")
			simFig, _ := simulatedFigures(t, simRes)
			fmt.Printf("SCENARIO kamaji-storm guard=on revisions=%d withPods<=%d peakPods=%d converged=%t simulated: revisions=%d withPods<=%d converged=%t\n",
				res.Revisions, res.PeakWithPods, res.PeakPods, res.Converged, simFig.Revisions, simFig.PeakRevisionsWithPods, simFig.Converged)
			if simFig.Revisions != res.Revisions || simFig.PeakRevisionsWithPods != res.PeakWithPods || simFig.Converged != res.Converged {
				t.Errorf("holdfast simulate disagrees with the control plane: simulated %+v, measured %+v", simFig, res)
			}
			t.Logf("holdfast refused %d updates; peak pods including terminating ones: %d", res.Refusals, res.PeakAll)
			maxSurge := 1 // 25% of 3, rounded up
			if res.Revisions > 2 || res.PeakWithPods > 2 || res.PeakPods > harness.StormReplicas+maxSurge || !res.Converged {
				t.Errorf("want at most 2 ReplicaSets, never more than 2 with pods, at most %d pods and convergence to GEN4; got %+v", harness.StormReplicas+maxSurge, res)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
