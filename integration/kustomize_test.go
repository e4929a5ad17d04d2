//go:build integration

package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/charts"
)

// kustomize builds config/default with the test bed's kubectl.
func kustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "kustomize", filepath.Join("..", "config", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind string, into any) bool {
	for _, u := range objs {
		if u.GetKind() == kind {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				panic(err)
			}
			return true
		}
	}
	return false
}

// TestKustomizeAppliesAndAgreesWithTheChart sends config/default to the real API server
// (server-side dry run) and checks that it installs the same RBAC and webhook rules as
// the chart.
func TestKustomizeAppliesAndAgreesWithTheChart(t *testing.T) {
	k := kustomize(t)
	for _, u := range k {
		if u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" {
			continue // both already exist in the test API server
		}
		// Create writes the server's defaulted answer into its argument: send a copy.
		if err := k8s.Create(context.Background(), u.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	h, err := charts.Render("holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}

	var kcr, hcr rbacv1.ClusterRole
	var kr, hr rbacv1.Role
	if !find(k, "ClusterRole", &kcr) || !find(h, "ClusterRole", &hcr) || !find(k, "Role", &kr) || !find(h, "Role", &hr) {
		t.Fatal("both must install a ClusterRole and a Role")
	}
	if diff := cmp.Diff(kcr.Rules, hcr.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(kr.Rules, hr.Rules); diff != "" {
		t.Errorf("Role rules (-kustomize +chart):\n%s", diff)
	}

	var kw, hw admissionregistrationv1.ValidatingWebhookConfiguration
	if !find(k, "ValidatingWebhookConfiguration", &kw) || !find(h, "ValidatingWebhookConfiguration", &hw) {
		t.Fatal("both must install a ValidatingWebhookConfiguration")
	}
	byName := map[string]admissionregistrationv1.ValidatingWebhook{}
	for _, w := range hw.Webhooks {
		byName[w.Name] = w
	}
	for _, w := range kw.Webhooks {
		c, ok := byName[w.Name]
		if !ok {
			t.Errorf("webhook %s only in kustomize", w.Name)
			continue
		}
		for what, pair := range map[string][2]any{
			"rules": {w.Rules, c.Rules}, "path": {*w.ClientConfig.Service.Path, *c.ClientConfig.Service.Path},
			"service": {w.ClientConfig.Service.Name, c.ClientConfig.Service.Name}, "namespaceSelector": {w.NamespaceSelector, c.NamespaceSelector},
			"matchConditions": {w.MatchConditions, c.MatchConditions}, "sideEffects": {*w.SideEffects, *c.SideEffects},
			"failurePolicy": {*w.FailurePolicy, *c.FailurePolicy}, "timeoutSeconds": {*w.TimeoutSeconds, *c.TimeoutSeconds},
		} {
			if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
				t.Errorf("%s %s (-kustomize +chart):\n%s", w.Name, what, diff)
			}
		}
		delete(byName, w.Name)
	}
	if len(byName) > 0 {
		t.Errorf("webhooks only in the chart: %v", byName)
	}
}
