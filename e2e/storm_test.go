//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
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
			p := utiltesting.MakeRolloutPolicy(ns).ArgMatchesReplicas("konnectivity-server", "--server-count").
				NamespaceSelector(map[string]string{corev1.LabelMetadataName: ns}).Obj()
			p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
			p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: 10 * time.Minute}
			// So that GEN1 finishing early cannot let GEN3 in before GEN4 (I2).
			p.Spec.Rules.MinInterval = &metav1.Duration{Duration: 10 * time.Second}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			waitEnforced(ctx, t, c, ns)
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

func newNamespace(ctx context.Context, t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName(prefix, 16)}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// waitEnforced waits until holdfast's cache has the namespace's policy: a dry-run create
// that breaks its --server-count rule is denied.
func waitEnforced(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	probe := utiltesting.MakeDeployment(ns, "probe").Replicas(2).Container("konnectivity-server", "--server-count=1").Obj()
	deadline := time.Now().Add(20 * time.Second)
	for !apierrors.IsForbidden(c.Create(ctx, probe.DeepCopy(), client.DryRunAll)) {
		if time.Now().After(deadline) {
			t.Fatalf("holdfast never enforced the policy in %s (log: %s)", ns, holdfastLog)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
