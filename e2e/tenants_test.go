//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestRecreatedOutsideTheSelectionCannotReturnMidRollout is a tenant's walk around the
// guard, through kube's own controllers: the guarded Deployment (selected by its label
// tier=control-plane) is deleted with --cascade=orphan and re-created without the label
// and with a new template, which no guard is asked about; the Deployment controller adopts
// the old ReplicaSet and rolls out the new one beside it. Relabelling it back into the
// policy while both templates have pods is refused with the way out; once the rollout has
// finished, the same relabel is admitted.
func TestRecreatedOutsideTheSelectionCannotReturnMidRollout(t *testing.T) {
	f := features.New("re-create outside the selection").
		Assess("the relabel back in waits for one template", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "tenant-walk")
			p := policyIn(ctx, t, c, ns, map[string]string{"tier": "control-plane"}, func(r *v1alpha1.RolloutRules) { r.Settle = &v1alpha1.SettleRule{} })

			d := utiltesting.MakeDeployment(ns, "kas").Label("tier", "control-plane").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
			d.Spec.Template = quickPods(d.Spec.Template)
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			waitReadyPods(ctx, t, c, ns, d.Name, 3)
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, d.Name, finished)

			// Orphan it, and re-create it unselected with template B, whose pods are slow.
			deleteOrphaning(ctx, t, c, d)
			again := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
			again.Spec.Template = quickPods(again.Spec.Template)
			again.Spec.Strategy = d.Spec.Strategy
			again.Spec.Template.Spec.Containers[0].Image = "registry.example/main:b"
			for k, v := range map[string]string{"pod-ready.stage.kwok.x-k8s.io/delay": "20s", "pod-ready.stage.kwok.x-k8s.io/jitter-delay": "20s"} {
				again.Spec.Template.Annotations[k] = v
			}
			if err := c.Create(ctx, again); err != nil {
				t.Fatalf("the re-create outside the selection: %v (nothing guards it)", err)
			}
			waitLiveTemplates(ctx, t, c, ns, d.Name, templateHash, 2) // B's pods join the adopted ones
			relabel := func(opts ...client.UpdateOption) error {
				return updateStored(ctx, c, again, func(d *appsv1.Deployment) { d.Labels["tier"] = "control-plane" }, opts...)
			}
			admittedProbes := probeUntilRefused(ctx, t, func() error { return relabel(client.DryRunAll) })
			err := relabel()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "brings the workload into the policy's selection") ||
				!strings.Contains(err.Error(), "roll it back") {
				t.Fatalf("relabelling it back in while %d templates have pods: %v, want 403 naming the way out", len(liveTemplates(ctx, t, c, ns, d.Name, templateHash)), err)
			}

			waitRolledOut(ctx, t, c, again)
			// One template now, its rollout finished: the entry still counts as the change
			// from the revision the journal of its name recorded (A), so a minInterval holds it.
			setMinInterval := func(d *metav1.Duration) {
				if err := updateStored(ctx, c, p, func(p *v1alpha1.RolloutPolicy) { p.Spec.Rules.MinInterval = d }); err != nil {
					t.Fatal(err)
				}
			}
			setMinInterval(&metav1.Duration{Duration: time.Hour})
			probeUntilRefused(ctx, t, func() error {
				err := relabel(client.DryRunAll)
				if err != nil && !strings.Contains(err.Error(), "minInterval") {
					t.Fatalf("relabelling B in within minInterval of A: %v, want a minInterval refusal", err)
				}
				return err
			})
			if err := relabel(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "outside the selection") {
				t.Fatalf("relabelling B in within minInterval of A: %v, want 403 saying the change was made outside the selection", err)
			}
			setMinInterval(nil)

			finishedAt := time.Now()
			retryUntilAdmitted(ctx, t, "the relabel once one template runs", relabel)
			fmt.Printf("SCENARIO recreate-outside-selection relabelRefusedMidRollout=true relabelRefusedWithinMinInterval=true relabelAdmittedAfterSeconds=%.1f admittedDryRunsBeforeRefusal=%d\n",
				time.Since(finishedAt).Seconds(), admittedProbes)
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
