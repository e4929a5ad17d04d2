// Package charts tests the Helm chart: lint, values schema, and what it renders.
package charts

import (
	"bytes"
	"log"
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

// TestLint lints the chart as `helm lint` does, with and without --namespace (Helm then
// lints in "default", where holdfast refuses to be installed): every template must render
// and pass, not be cut short by the namespace check, which lint mode turns into an INFO
// line.
func TestLint(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	for _, ns := range []string{"holdfast-system", "default", ""} {
		linter := lint.All(chartDir, nil, ns, true)
		for _, m := range linter.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint --namespace %q: %s", ns, m)
			}
		}
	}
	if logged.Len() > 0 {
		t.Errorf("helm lint logged (a failed template in lint mode?):\n%s", logged.String())
	}
	// What JSON Schema can express, helm lint refuses (docs/install.md lists the checks that
	// only install and template make).
	for name, vals := range map[string]map[string]any{
		"replicaCount 0":                {"replicaCount": 0},
		"podDisruptionBudget at 100%":   {"podDisruptionBudget": map[string]any{"minAvailable": "100%"}},
		"podDisruptionBudget over 100%": {"podDisruptionBudget": map[string]any{"minAvailable": "150%"}},
	} {
		if linter := lint.All(chartDir, vals, "", true); linter.HighestSeverity < support.ErrorSev {
			t.Errorf("helm lint accepted %s: %v", name, linter.Messages)
		}
	}
	// A percentage below 100% passes.
	if linter := lint.All(chartDir, map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": "50%"}}, "holdfast-system", true); linter.HighestSeverity >= support.WarningSev {
		t.Errorf("helm lint refused minAvailable 50%%: %v", linter.Messages)
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
	// No priority class by default: many managed platforms admit system-cluster-critical
	// only in kube-system.
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.PriorityClassName != "" {
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

// TestRenderCertManager follows the chain cert-manager mode renders: a self-signed Issuer
// signs a CA Certificate, an Issuer of that CA signs the serving certificate, and the
// webhook configuration trusts the serving certificate's ca.crt, the CA, which a renewal
// of the serving certificate leaves alone.
func TestRenderCertManager(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"certificates": map[string]any{"mode": "cert-manager"}})
	if err != nil {
		t.Fatal(err)
	}
	if objs["Secret/holdfast-webhook-cert"] != nil {
		t.Error("cert-manager mode renders no Secret: cert-manager writes it")
	}
	str := func(u *unstructured.Unstructured, path ...string) string {
		if u == nil {
			t.Fatalf("missing object for %v; got %v", path, keys(objs))
		}
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		s, _ := v.(string)
		return s
	}
	leaf := objs["Certificate/holdfast-webhook-cert"]
	caIssuer := objs["Issuer/"+str(leaf, "spec", "issuerRef", "name")]
	if str(leaf, "spec", "issuerRef", "kind") != "Issuer" || str(leaf, "spec", "secretName") != "holdfast-webhook-cert" {
		t.Errorf("serving certificate: %v", leaf.Object["spec"])
	}
	ca := objs["Certificate/holdfast-ca"]
	if str(caIssuer, "spec", "ca", "secretName") != str(ca, "spec", "secretName") {
		t.Errorf("the serving certificate's Issuer must be the CA's: %v", caIssuer.Object["spec"])
	}
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA || str(ca, "spec", "privateKey", "rotationPolicy") != "Never" {
		t.Errorf("the CA must be a CA that keeps its key when renewed: %v", ca.Object["spec"])
	}
	if root := objs["Issuer/"+str(ca, "spec", "issuerRef", "name")]; root == nil || root.Object["spec"].(map[string]any)["selfSigned"] == nil {
		t.Errorf("the CA must be signed by a self-signed Issuer, got %v", root)
	}
	if got := objs["ValidatingWebhookConfiguration/holdfast"].GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "holdfast-system/holdfast-webhook-cert" {
		t.Errorf("inject-ca-from = %q", got)
	}
	var d appsv1.Deployment
	typed(t, objs["Deployment/holdfast"], &d)
	if slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--cert-rotation=true") {
		t.Error("cert-manager mode must not turn on holdfast's own rotation")
	}

	// An issuer of the user's own signs the serving certificate directly.
	objs, err = render(t, "holdfast-system", map[string]any{"certificates": map[string]any{"mode": "cert-manager",
		"certManager": map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := str(objs["Certificate/holdfast-webhook-cert"], "spec", "issuerRef", "name"); got != "corp-ca" || objs["Certificate/holdfast-ca"] != nil || len(byName(mapValues(objs), "Issuer")) != 0 {
		t.Errorf("with issuerRef the chart issues from it and creates no CA: issuer %q, objects %v", got, keys(objs))
	}

	// The entries holdfast derives from the policies take the chart's name and defaults
	// whoever issues the certificate.
	objs, err = render(t, "holdfast-system", map[string]any{"certificates": map[string]any{"mode": "cert-manager"},
		"fullnameOverride": "guard", "webhook": map[string]any{"rollout": map[string]any{"failurePolicy": "Fail", "timeoutSeconds": 7}}})
	if err != nil {
		t.Fatal(err)
	}
	typed(t, objs["Deployment/guard"], &d)
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, arg := range []string{"--webhook-configuration=guard", "--rollout-failure-policy=Fail", "--rollout-timeout-seconds=7", "--eviction-failure-policy=Ignore"} {
		if !slices.Contains(args, arg) {
			t.Errorf("cert-manager mode: missing %s in %v", arg, args)
		}
	}
}

// TestRenderSamples: samples.enabled installs every policy of config/samples, in
// samples.mode (Warn by default); outside Enforce the samples generate no PDBs, which would
// hold evictions whatever the mode. In Enforce they are config/samples unchanged.
func TestRenderSamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	want := map[string]map[string]any{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		u := unstructured.Unstructured{Object: obj}
		want[u.GetKind()+"/"+u.GetName()] = obj
	}
	if len(want) == 0 {
		t.Fatal("no samples in config/samples")
	}
	for _, mode := range []string{"", "Warn", "Audit", "Enforce"} {
		samples := map[string]any{"enabled": true}
		if mode != "" {
			samples["mode"] = mode
		}
		objs, err := render(t, "holdfast-system", map[string]any{"samples": samples})
		if err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
		if mode == "" {
			mode = "Warn"
		}
		n := 0
		for key, u := range objs {
			if u.GetAPIVersion() != "holdfast.dev/v1alpha1" {
				continue
			}
			n++
			if got, _, _ := unstructured.NestedString(u.Object, "spec", "mode"); got != mode {
				t.Errorf("%s: mode %q, want %s", key, got, mode)
			}
			generate, _, _ := unstructured.NestedBool(u.Object, "spec", "pdb", "generate")
			if mode == "Enforce" {
				if diff := cmp.Diff(want[key], u.Object); diff != "" {
					t.Errorf("%s in Enforce differs from config/samples (-config +chart):\n%s", key, diff)
				}
			} else if generate {
				t.Errorf("%s in %s generates PodDisruptionBudgets", key, mode)
			}
		}
		if n != len(want) {
			t.Errorf("mode %s: rendered %d sample policies, config/samples has %d", mode, n, len(want))
		}
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

// TestValuesSchemaRejectsBadValues holds the schema (and, for what it cannot express, the
// templates) to refusing bad values with a message that names the value.
func TestValuesSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vals  map[string]any
		names string // what the error must name
	}{
		{"failure policy", map[string]any{"webhook": map[string]any{"rollout": map[string]any{"failurePolicy": "Sometimes"}}}, "failurePolicy"},
		{"unknown key", map[string]any{"replicas": 3}, "replicas"},
		{"zero replicas", map[string]any{"replicaCount": 0}, "replicaCount"},
		{"cert mode", map[string]any{"certificates": map[string]any{"mode": "none"}}, "mode"},
		{"umbrella's enabled not a boolean", map[string]any{"enabled": "yes"}, "enabled"},
		{"fullnameOverride not a DNS label", map[string]any{"fullnameOverride": "Holdfast_1"}, "fullnameOverride"},
		{"fullnameOverride too long for its Services", map[string]any{"fullnameOverride": strings.Repeat("h", 56)}, "fullnameOverride"},
		{"podLabels overriding the selector", map[string]any{"podLabels": map[string]any{"app.kubernetes.io/name": "other"}}, "podLabels"},
		{"podAnnotations not strings", map[string]any{"podAnnotations": map[string]any{"a": 1}}, "podAnnotations"},
		{"hostNetwork not a boolean", map[string]any{"hostNetwork": "true"}, "hostNetwork"},
		{"probe port", map[string]any{"probes": map[string]any{"port": 0}}, "port"},
		{"negative minAvailable", map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": -1}}, "minAvailable"},
		{"minAvailable neither number nor percentage", map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": "one"}}, "minAvailable"},
		{"minAvailable not below replicaCount", map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": 2}}, "podDisruptionBudget.minAvailable (2)"},
		{"minAvailable 100% (the schema)", map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": "100%"}}, "minAvailable"},
		{"networkPolicy unknown key", map[string]any{"networkPolicy": map[string]any{"from": []any{}}}, "from"},
		{"networkPolicy peers not objects", map[string]any{"networkPolicy": map[string]any{"metricsFrom": []any{"monitoring"}}}, "metricsFrom"},
		{"ServiceMonitor labels not strings", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"additionalLabels": map[string]any{"release": true}}}}, "additionalLabels"},
		{"PrometheusRule labels not a map", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"additionalLabels": "release=x"}}}, "additionalLabels"},
		{"samples mode", map[string]any{"samples": map[string]any{"mode": "Dryrun"}}, "mode"},
		{"dashboard unknown key", map[string]any{"metrics": map[string]any{"dashboard": map[string]any{"label": "x"}}}, "label"},
		{"dashboard namespace not a DNS label", map[string]any{"metrics": map[string]any{"dashboard": map[string]any{"namespace": "Monitoring"}}}, "namespace"},
		{"unavailableFor not a duration", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"unavailableFor": "5 minutes"}}}, "unavailableFor"},
		{"scrapeJob breaking out of its selector", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"scrapeJob": `pods"} or vector(1`}}}, "scrapeJob"},
	} {
		_, err := render(t, "holdfast-system", tc.vals)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else if !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%s: the error does not name %s: %v", tc.name, tc.names, err)
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

func mapValues(m map[string]*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		out = append(out, u)
	}
	return out
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRenderTenancy: tenancy.enabled renders config/tenancy's ValidatingAdmissionPolicies
// and bindings (copied by hack/chartgen, so the two cannot drift) under the release's name,
// with the same specs; off by default, as config/default leaves them out.
func TestRenderTenancy(t *testing.T) {
	want, err := Kustomize("tenancy")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("config/tenancy holds nothing")
	}
	objs, err := render(t, "holdfast-system", map[string]any{"fullnameOverride": "guard", "tenancy": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		name := "guard-" + strings.TrimPrefix(w.GetName(), "holdfast-")
		got := objs[w.GetKind()+"/"+name]
		if got == nil {
			t.Errorf("%s %s (config/tenancy's %s) not rendered", w.GetKind(), name, w.GetName())
			continue
		}
		spec, _, _ := unstructured.NestedMap(w.Object, "spec")
		if p, ok := spec["policyName"].(string); ok {
			spec["policyName"] = "guard-" + strings.TrimPrefix(p, "holdfast-")
		}
		if diff := cmp.Diff(spec, got.Object["spec"]); diff != "" {
			t.Errorf("%s %s differs from config/tenancy (-config +chart):\n%s", w.GetKind(), name, diff)
		}
		if got.GetLabels()["app.kubernetes.io/name"] == "" {
			t.Errorf("%s %s carries no chart labels: %v", w.GetKind(), name, got.GetLabels())
		}
	}
	defaults, err := render(t, "holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if key := w.GetKind() + "/" + w.GetName(); defaults[key] != nil {
			t.Errorf("rendered without tenancy.enabled: %s", key)
		}
	}
}
