//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/charts"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// TestChartOnKwok sends every object of the rendered chart, samples included, to the kwok
// cluster's API server as a server-side dry run: each must be accepted, the webhook
// configuration with its matchConditions included, and the CRDs applied over the installed
// ones as helm upgrade applies them.
func TestChartOnKwok(t *testing.T) {
	f := features.New("chart").
		Assess("every rendered object is accepted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			objs, err := charts.Render(holdfastNamespace, map[string]any{"samples": map[string]any{"enabled": true}})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range objs {
				err := c.Create(ctx, u, client.DryRunAll)
				if u.GetKind() == "ServiceAccount" && u.GetAnnotations()["helm.sh/hook"] == "test" {
					// `helm test` creates its pod's ServiceAccount first, and the API server
					// looks it up when the pod is created, dry run or not: created for real.
					err = c.Create(ctx, u)
					t.Cleanup(func() { _ = c.Delete(context.Background(), u) })
				}
				if u.GetKind() == "CustomResourceDefinition" {
					err = c.Patch(ctx, u, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner("helm"))
				}
				if err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestUninstallLeavesNoScopedWebhooks: the webhook configuration holdfast's leader writes
// (<anchor>-guards) is owned by the installed one (the chart's, kustomize's), so that the
// garbage collector removes it once `helm uninstall` (or `kubectl delete -k`) deletes the
// installed one: no webhook is left pointing at a Service that is gone. The owner
// reference is read from the configuration the running holdfast wrote, then given to a
// copy owned by a configuration this test deletes as Helm does (background propagation);
// kube-controller-manager's garbage collector must remove the copy.
func TestUninstallLeavesNoScopedWebhooks(t *testing.T) {
	f := features.New("uninstall").
		Assess("the scoped configuration goes with the installed one", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			anchor := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := c.Get(ctx, client.ObjectKey{Name: harness.WebhookConfigName}, anchor); err != nil {
				t.Fatal(err)
			}
			scoped := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := c.Get(ctx, client.ObjectKey{Name: interception.Name(anchor.Name)}, scoped)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("holdfast has not written %s: %v", interception.Name(anchor.Name), err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			owners := scoped.OwnerReferences
			if len(owners) != 1 || owners[0].Kind != "ValidatingWebhookConfiguration" || owners[0].Name != anchor.Name || owners[0].UID != anchor.UID {
				t.Fatalf("%s is owned by %+v, want the installed configuration %s (UID %s) alone", scoped.Name, owners, anchor.Name, anchor.UID)
			}

			installed := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "uninstall-test"}}
			if err := c.Create(ctx, installed); err != nil {
				t.Fatal(err)
			}
			ref := owners[0]
			ref.Name, ref.UID = installed.Name, installed.UID
			copied := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: interception.Name(installed.Name),
				Labels: scoped.Labels, OwnerReferences: []metav1.OwnerReference{ref}}}
			if err := c.Create(ctx, copied); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), copied) })
			if err := c.Delete(ctx, installed, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				t.Fatal(err)
			}
			deadline = time.Now().Add(60 * time.Second)
			for {
				err := c.Get(ctx, client.ObjectKeyFromObject(copied), &admissionregistrationv1.ValidatingWebhookConfiguration{})
				if apierrors.IsNotFound(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s outlived the configuration that owns it by 60 s: %v", copied.Name, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
