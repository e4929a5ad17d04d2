// Package charts tests the Helm chart: lint, values schema, and what it renders.
package charts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const chartDir = "holdfast"

// render renders the chart and returns the objects by kind and name.
func render(t *testing.T, ns string, values map[string]any) (map[string]*unstructured.Unstructured, error) {
	t.Helper()
	list, err := Render(ns, values)
	if err != nil {
		return nil, err
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, u := range list {
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	return objs, nil
}

// typed converts a rendered object strictly into its Go type, failing on unknown fields.
func typed(t *testing.T, u *unstructured.Unstructured, into runtime.Object) {
	t.Helper()
	raw, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s/%s does not decode strictly: %v", u.GetKind(), u.GetName(), err)
	}
}

func TestLint(t *testing.T) {
	linter := lint.All(chartDir, nil, "holdfast-system", true)
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

func TestRenderDefaults(t *testing.T) {
	objs, err := render(t, "holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Deployment/holdfast", "ServiceAccount/holdfast", "ClusterRole/holdfast", "ClusterRoleBinding/holdfast",
		"Role/holdfast", "RoleBinding/holdfast", "Service/holdfast-webhook", "Service/holdfast-metrics", "Secret/holdfast-webhook-cert",
		"ValidatingWebhookConfiguration/holdfast", "PodDisruptionBudget/holdfast"} {
		if objs[want] == nil {
			t.Errorf("missing %s", want)
		}
	}
	for key, u := range objs {
		if _, err := clientgoscheme.Scheme.New(u.GroupVersionKind()); err != nil {
			t.Errorf("%s: kind unknown to Kubernetes: %v", key, err)
		}
	}

	var d appsv1.Deployment
	typed(t, objs["Deployment/holdfast"], &d)
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("replicas %d, priorityClassName %q", *d.Spec.Replicas, d.Spec.Template.Spec.PriorityClassName)
	}
	assertRestricted(t, &d.Spec.Template.Spec)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--cert-rotation=true") {
		t.Errorf("self-managed certificates must turn on --cert-rotation: %v", d.Spec.Template.Spec.Containers[0].Args)
	}

	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	typed(t, objs["ValidatingWebhookConfiguration/holdfast"], &vwc)
	generated := generatedWebhooks(t)
	for _, w := range vwc.Webhooks {
		if w.NamespaceSelector == nil || len(w.NamespaceSelector.MatchExpressions) != 1 ||
			w.NamespaceSelector.MatchExpressions[0].Key != corev1.LabelMetadataName || w.NamespaceSelector.MatchExpressions[0].Values[0] != "holdfast-system" {
			t.Errorf("%s must exclude holdfast's namespace: %+v", w.Name, w.NamespaceSelector)
		}
		if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.TimeoutSeconds != 3 {
			t.Errorf("%s: failurePolicy %s, timeout %d", w.Name, *w.FailurePolicy, *w.TimeoutSeconds)
		}
		g, ok := generated[w.Name]
		if !ok {
			t.Errorf("%s is not in config/webhook", w.Name)
			continue
		}
		if diff := cmp.Diff(g.Rules, w.Rules); diff != "" {
			t.Errorf("%s rules differ from config/webhook (-config +chart):\n%s", w.Name, diff)
		}
		if *w.ClientConfig.Service.Path != *g.ClientConfig.Service.Path || *w.SideEffects != *g.SideEffects {
			t.Errorf("%s path or sideEffects differ from config/webhook", w.Name)
		}
		delete(generated, w.Name)
	}
	if len(generated) > 0 {
		t.Errorf("webhooks in config/webhook but not in the chart: %v", generated)
	}

	var cr rbacv1.ClusterRole
	typed(t, objs["ClusterRole/holdfast"], &cr)
	var role rbacv1.Role
	typed(t, objs["Role/holdfast"], &role)
	wantCR, wantRole := generatedRBAC(t)
	if diff := cmp.Diff(wantCR, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules differ from config/rbac (-config +chart):\n%s", diff)
	}
	if diff := cmp.Diff(wantRole, role.Rules); diff != "" {
		t.Errorf("Role rules differ from config/rbac (-config +chart):\n%s", diff)
	}
}

func TestRenderRefusesSharedNamespaces(t *testing.T) {
	for _, ns := range []string{"kube-system", "kube-public", "default"} {
		if _, err := render(t, ns, nil); err == nil || !strings.Contains(err.Error(), "must not be installed in") {
			t.Errorf("namespace %s: got %v, want a refusal", ns, err)
		}
	}
}

func TestRenderCertManager(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"certificates": map[string]any{"mode": "cert-manager"}})
	if err != nil {
		t.Fatal(err)
	}
	if objs["Certificate/holdfast-webhook-cert"] == nil || objs["Issuer/holdfast-selfsigned"] == nil || objs["Secret/holdfast-webhook-cert"] != nil {
		t.Errorf("cert-manager mode renders a Certificate and an Issuer and no Secret; got %v", keys(objs))
	}
	if got := objs["ValidatingWebhookConfiguration/holdfast"].GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "holdfast-system/holdfast-webhook-cert" {
		t.Errorf("inject-ca-from = %q", got)
	}
}

func TestRenderSamples(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"samples": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	samples, _ := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	n := 0
	for _, u := range objs {
		if u.GetAPIVersion() == "holdfast.dev/v1alpha1" {
			n++
		}
	}
	if n == 0 || n != len(samples) {
		t.Errorf("rendered %d sample policies, config/samples has %d", n, len(samples))
	}
	if objs, _ := render(t, "holdfast-system", nil); len(objs) == 0 {
		t.Fatal("no objects")
	} else {
		for _, u := range objs {
			if u.GetAPIVersion() == "holdfast.dev/v1alpha1" {
				t.Errorf("samples rendered without samples.enabled: %s", u.GetName())
			}
		}
	}
}

func TestValuesSchemaRejectsBadValues(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"failure policy": {"webhook": map[string]any{"rollout": map[string]any{"failurePolicy": "Sometimes"}}},
		"unknown key":    {"replicas": 3},
		"zero replicas":  {"replicaCount": 0},
		"cert mode":      {"certificates": map[string]any{"mode": "none"}},
	} {
		if _, err := render(t, "holdfast-system", vals); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// assertRestricted checks the fields the restricted Pod Security Standard requires.
func assertRestricted(t *testing.T, pod *corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v is not restricted", psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s securityContext %+v is not restricted", c.Name, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s has no resource requests", c.Name)
		}
	}
}

func generatedWebhooks(t *testing.T) map[string]admissionregistrationv1.ValidatingWebhook {
	raw, err := os.ReadFile(filepath.Join("..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &vwc); err != nil {
		t.Fatal(err)
	}
	out := map[string]admissionregistrationv1.ValidatingWebhook{}
	for _, w := range vwc.Webhooks {
		out[w.Name] = w
	}
	return out
}

func generatedRBAC(t *testing.T) (clusterRole, role []rbacv1.PolicyRule) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ClusterRole":
			clusterRole = obj.Rules
		case "Role":
			role = obj.Rules
		}
	}
	return clusterRole, role
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
