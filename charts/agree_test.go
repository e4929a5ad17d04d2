package charts

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestChartAgreesWithKustomize holds the chart and config/default to the same CRDs (the
// chart's templated ones, as `helm upgrade` applies them), RBAC rules, webhook rules and
// server command; `make verify` runs it.
func TestChartAgreesWithKustomize(t *testing.T) {
	k, err := Kustomize("default")
	if err != nil {
		t.Fatal(err)
	}
	h, err := Render("holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	// `helm test`'s objects are not installed with the release.
	h = slices.DeleteFunc(h, func(u *unstructured.Unstructured) bool { return u.GetAnnotations()["helm.sh/hook"] == "test" })

	kcrds, hcrds := byName(k, "CustomResourceDefinition"), byName(h, "CustomResourceDefinition")
	if len(kcrds) == 0 {
		t.Error("config/default installs no CRDs")
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(kcrds)), slices.Sorted(maps.Keys(hcrds))); diff != "" {
		t.Errorf("CRDs (-kustomize +chart):\n%s", diff)
	}
	for name, kc := range kcrds {
		if hc, ok := hcrds[name]; ok {
			if diff := cmp.Diff(kc.Object["spec"], hc.Object["spec"]); diff != "" {
				t.Errorf("CRD %s spec (-kustomize +chart):\n%s", name, diff)
			}
		}
	}

	var kcr, hcr rbacv1.ClusterRole
	var kr, hr rbacv1.Role
	if !one(t, k, "ClusterRole", &kcr) || !one(t, h, "ClusterRole", &hcr) || !one(t, k, "Role", &kr) || !one(t, h, "Role", &hr) {
		t.Fatal("both must install one ClusterRole and one Role")
	}
	if diff := cmp.Diff(kcr.Rules, hcr.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(kr.Rules, hr.Rules); diff != "" {
		t.Errorf("Role rules (-kustomize +chart):\n%s", diff)
	}

	var kw, hw admissionregistrationv1.ValidatingWebhookConfiguration
	if !one(t, k, "ValidatingWebhookConfiguration", &kw) || !one(t, h, "ValidatingWebhookConfiguration", &hw) {
		t.Fatal("both must install one ValidatingWebhookConfiguration")
	}
	chart := map[string]admissionregistrationv1.ValidatingWebhook{}
	for _, w := range hw.Webhooks {
		chart[w.Name] = w
	}
	for _, w := range kw.Webhooks {
		c, ok := chart[w.Name]
		if !ok {
			t.Errorf("webhook %s only in kustomize", w.Name)
			continue
		}
		delete(chart, w.Name)
		if w.ClientConfig.Service == nil || c.ClientConfig.Service == nil {
			t.Errorf("webhook %s: both must call the holdfast Service", w.Name)
			continue
		}
		for what, pair := range map[string][2]any{
			"rules": {w.Rules, c.Rules}, "path": {w.ClientConfig.Service.Path, c.ClientConfig.Service.Path},
			"service": {w.ClientConfig.Service.Name, c.ClientConfig.Service.Name}, "namespaceSelector": {w.NamespaceSelector, c.NamespaceSelector},
			"objectSelector": {w.ObjectSelector, c.ObjectSelector}, "matchConditions": {w.MatchConditions, c.MatchConditions},
			"sideEffects": {w.SideEffects, c.SideEffects}, "failurePolicy": {w.FailurePolicy, c.FailurePolicy},
			"timeoutSeconds": {w.TimeoutSeconds, c.TimeoutSeconds}, "matchPolicy": {w.MatchPolicy, c.MatchPolicy},
		} {
			if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
				t.Errorf("webhook %s %s (-kustomize +chart):\n%s", w.Name, what, diff)
			}
		}
	}
	for name := range chart {
		t.Errorf("webhook %s only in the chart", name)
	}

	// Both start the server with `serve`; the root command alone serves only for manifests
	// written before it existed, and is deprecated.
	var kd, hd appsv1.Deployment
	if !one(t, k, "Deployment", &kd) || !one(t, h, "Deployment", &hd) {
		t.Fatal("both must install one Deployment")
	}
	for what, d := range map[string]appsv1.Deployment{"kustomize": kd, "chart": hd} {
		if args := d.Spec.Template.Spec.Containers[0].Args; len(args) == 0 || args[0] != "serve" {
			t.Errorf("%s Deployment args %v, want serve first", what, args)
		}
	}
}

func byName(objs []*unstructured.Unstructured, kind string) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		if u.GetKind() == kind {
			out[u.GetName()] = u
		}
	}
	return out
}

// one converts the only object of a kind into its Go type.
func one(t *testing.T, objs []*unstructured.Unstructured, kind string, into any) bool {
	t.Helper()
	m := byName(objs, kind)
	if len(m) != 1 {
		t.Errorf("%d objects of kind %s, want 1", len(m), kind)
		return false
	}
	for _, u := range m {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			t.Errorf("%s %s: %v", kind, u.GetName(), err)
			return false
		}
	}
	return true
}
