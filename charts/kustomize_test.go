package charts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestKustomizeOverlayNamespace builds an overlay of config/default that sets another
// namespace, as docs/install.md shows: holdfast's --namespace flag and its webhooks'
// exclusion of its own namespace must follow, and nothing may be left in holdfast-system.
func TestKustomizeOverlayNamespace(t *testing.T) {
	dir := t.TempDir()
	config, err := filepath.Abs(ConfigDir())
	if err != nil {
		t.Fatal(err)
	}
	// Kustomize refuses absolute paths to other kustomizations.
	rel, err := filepath.Rel(dir, config)
	if err != nil {
		t.Fatal(err)
	}
	overlay := "resources:\n  - " + filepath.Join(rel, "default") + "\nnamespace: platform-guard\n" +
		"transformers:\n  - " + filepath.Join(rel, "namespace") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}

	objs, err := kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if !one(t, objs, "Deployment", &d) || !one(t, objs, "ValidatingWebhookConfiguration", &vwc) {
		t.FailNow()
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; d.Namespace != "platform-guard" || !slices.Contains(args, "--namespace=platform-guard") {
		t.Errorf("Deployment in %q with args %v, want --namespace=platform-guard", d.Namespace, args)
	}
	for _, w := range vwc.Webhooks {
		if got := w.NamespaceSelector.MatchExpressions[0].Values; !slices.Equal(got, []string{"platform-guard"}) {
			t.Errorf("%s excludes %v, want holdfast's namespace platform-guard", w.Name, got)
		}
	}
	for _, u := range objs {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "holdfast-system") {
			t.Errorf("%s %s still names holdfast-system:\n%s", u.GetKind(), u.GetName(), raw)
		}
	}
}
