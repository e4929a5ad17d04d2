//go:build integration

package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// selectorRuleFields are the fields of the selector rules this release added to the CRDs
// (format.qualifiedName, format.labelValue): the previous release's CRDs had none.
var selectorRuleFields = []string{".matchLabels", ".matchExpressions"}

// withPreviousCRDs runs f with both CRDs as the previous release shipped them (no label
// key and value rules on the selectors), then upgrades them back and waits until the API
// server enforces the rules again: a policy stored in f is one stored before the upgrade.
func withPreviousCRDs(t *testing.T, f func()) {
	t.Helper()
	ctx := context.Background()
	admin, err := client.New(restConfig, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"rolloutpolicies.holdfast.dev", "disruptionpolicies.holdfast.dev"}
	originals := map[string][]apiextensionsv1.CustomResourceDefinitionVersion{}
	edit := func(name string, change func(*apiextensionsv1.CustomResourceDefinition)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := admin.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			change(crd)
			return admin.Update(ctx, crd)
		})
		if err != nil {
			t.Fatalf("updating the CRD %s: %v", name, err)
		}
	}
	for _, name := range names {
		edit(name, func(crd *apiextensionsv1.CustomResourceDefinition) {
			originals[name] = crd.DeepCopy().Spec.Versions
			for _, v := range crd.Spec.Versions {
				targets := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["targets"]
				for sel, s := range targets.Properties {
					s.XValidations = slices.DeleteFunc(s.XValidations, func(r apiextensionsv1.ValidationRule) bool {
						return slices.Contains(selectorRuleFields, r.FieldPath)
					})
					targets.Properties[sel] = s
				}
			}
		})
	}
	upgraded := false
	upgrade := func() {
		if upgraded {
			return
		}
		upgraded = true
		for _, name := range names {
			edit(name, func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions = originals[name] })
		}
		waitSelectorRules(t, true)
	}
	t.Cleanup(upgrade)
	waitSelectorRules(t, false)
	f()
	upgrade()
}

// waitSelectorRules waits until the API server refuses (enforced) or accepts a policy
// whose selector has a label key kube cannot parse, by a dry run that holdfast's policy
// webhook is not sent (it refuses such a key itself).
func waitSelectorRules(t *testing.T, enforced bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-probe-"},
			Spec: v1alpha1.DisruptionPolicySpec{Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"-bad": "x"}}}}}
		var err error
		withoutPolicyValidation(t, func() { err = k8s.Create(context.Background(), p, client.DryRunAll) })
		if (err != nil && apierrors.IsInvalid(err)) == enforced {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server did not follow the CRD update (want the selector rules enforced: %t): %v", enforced, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestInvalidPolicyStoredBeforeTheUpgradeCanBeTurnedOff: a policy with a label key kube
// cannot parse, stored before this release's CRDs while holdfast was down, stays stored
// after the upgrade (the schema ratchets it), selects nothing, and its off switch and its
// delete are admitted by the API server and by holdfast's policy webhook; a new invalid
// key is refused by the schema, with or without holdfast.
func TestInvalidPolicyStoredBeforeTheUpgradeCanBeTurnedOff(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-old-invalid"},
		Spec: v1alpha1.DisruptionPolicySpec{Targets: v1alpha1.PodTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}}}
	withPreviousCRDs(t, func() {
		withoutPolicyValidation(t, func() {
			if err := k8s.Create(ctx, p); err != nil {
				t.Fatalf("the previous CRD refused a key it had no rule for: %v", err)
			}
		})
	})
	t.Cleanup(func() { _ = k8s.Delete(ctx, p) })

	update := func(change func(*v1alpha1.DisruptionPolicy)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &v1alpha1.DisruptionPolicy{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			change(got)
			return k8s.Update(ctx, got)
		})
	}
	if err := update(func(got *v1alpha1.DisruptionPolicy) { got.Spec.Suspend = true }); err != nil {
		t.Fatalf("turning off a policy stored before the upgrade: %v, want it admitted", err)
	}
	err := update(func(got *v1alpha1.DisruptionPolicy) {
		got.Spec.Targets.NamespaceSelector.MatchLabels = map[string]string{"worse key!": "x"}
	})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("changing the invalid key to another invalid one: %v, want it refused as invalid", err)
	}
	if err := update(func(got *v1alpha1.DisruptionPolicy) {
		got.Spec.Targets.NamespaceSelector.MatchLabels = map[string]string{"tier": "agents"}
	}); err != nil {
		t.Fatalf("fixing the selector: %v", err)
	}
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatalf("deleting the policy: %v", err)
	}
}
