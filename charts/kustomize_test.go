package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestKustomizeOverlayNamespace builds an overlay of config/default that sets another
// namespace, as docs/install.md shows: holdfast reads it from the downward API, its
// webhooks' exclusion of its own namespace follows, and nothing may be left in
// holdfast-system.
func TestKustomizeOverlayNamespace(t *testing.T) {
	objs := namespaceOverlay(t, "transformers:\n  - {config}/namespace\n")
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if !one(t, objs, "ValidatingWebhookConfiguration", &vwc) {
		t.FailNow()
	}
	holdfastInNamespace(t, objs, "platform-guard")
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

// TestKustomizePlainNamespaceOverlay: an overlay that sets the namespace alone, no
// transformer, runs holdfast there and holdfast knows it (the downward API); every
// namespaced object moves with it, and the only holdfast-system left is the policy
// webhook's exclusion, which the API server ignores for cluster-scoped policies.
func TestKustomizePlainNamespaceOverlay(t *testing.T) {
	objs := namespaceOverlay(t, "")
	holdfastInNamespace(t, objs, "platform-guard")
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" && ns != "platform-guard" {
			t.Errorf("%s %s is in %s", u.GetKind(), u.GetName(), ns)
		}
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if !one(t, objs, "ValidatingWebhookConfiguration", &vwc) {
		t.FailNow()
	}
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Namespace != "platform-guard" {
			t.Errorf("%s calls %+v, want holdfast's Service in platform-guard", w.Name, w.ClientConfig.Service)
		}
		// holdfast's policies are cluster-scoped (api/v1alpha1, scope=Cluster).
		for _, r := range w.Rules {
			if !slices.Equal(r.APIGroups, []string{"holdfast.dev"}) {
				t.Errorf("%s sends requests of %v, not only holdfast's cluster-scoped policies: its stale namespaceSelector would matter", w.Name, r.APIGroups)
			}
		}
	}
}

// holdfastInNamespace checks that holdfast's Deployment is in ns and that holdfast reads its
// namespace from the downward API, not from a flag an overlay would have to rewrite.
func holdfastInNamespace(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	var d appsv1.Deployment
	if !one(t, objs, "Deployment", &d) {
		t.FailNow()
	}
	c := d.Spec.Template.Spec.Containers[0]
	if d.Namespace != ns || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--namespace") }) {
		t.Errorf("Deployment in %q with args %v, want %s and no --namespace", d.Namespace, c.Args, ns)
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("env %+v: want POD_NAMESPACE from metadata.namespace", c.Env)
	}
}

// namespaceOverlay builds an overlay of config/default in namespace platform-guard, with
// extra kustomization lines ({config} is config/'s path from the overlay).
func namespaceOverlay(t *testing.T, extra string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Overlay(t.TempDir(), "resources:\n  - {config}/default\nnamespace: platform-guard\n"+extra)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestKustomizeCertManager: the cert-manager component (config/certmanager) installs the
// objects the chart renders with certificates.mode=cert-manager, in holdfast-system and,
// with its namespace transformer, in another namespace: the same Issuers and
// Certificates, no Secret of holdfast's, no rotation of its own, and the CA injected from
// the serving Certificate of holdfast's namespace.
func TestKustomizeCertManager(t *testing.T) {
	for ns, kustomization := range map[string]string{
		"holdfast-system": "resources:\n  - {config}/default\ncomponents:\n  - {config}/certmanager\n",
		"platform-guard": "resources:\n  - {config}/default\nnamespace: platform-guard\ncomponents:\n  - {config}/certmanager\n" +
			"transformers:\n  - {config}/namespace\n  - {config}/certmanager/namespace\n",
	} {
		t.Run(ns, func(t *testing.T) {
			k, err := Overlay(t.TempDir(), kustomization)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Render(ns, map[string]any{"certificates": map[string]any{"mode": "cert-manager"}})
			if err != nil {
				t.Fatal(err)
			}
			holdfastInNamespace(t, k, ns)
			chart := map[string]*unstructured.Unstructured{}
			for _, u := range h {
				if u.GetAPIVersion() == "cert-manager.io/v1" {
					chart[u.GetKind()+"/"+u.GetName()] = u
				}
			}
			for _, u := range k {
				switch {
				case u.GetKind() == "Secret" && u.GetName() == "holdfast-webhook-cert":
					t.Error("the component leaves holdfast's own Secret: cert-manager writes it")
				case u.GetAPIVersion() == "cert-manager.io/v1":
					key := u.GetKind() + "/" + u.GetName()
					c := chart[key]
					delete(chart, key)
					if c == nil {
						t.Errorf("%s only in kustomize", key)
					} else if diff := cmp.Diff(c.Object["spec"], u.Object["spec"]); diff != "" || u.GetNamespace() != ns {
						t.Errorf("%s in %s (-chart +kustomize):\n%s", key, u.GetNamespace(), diff)
					}
				}
			}
			for key := range chart {
				t.Errorf("%s only in the chart", key)
			}
			var d appsv1.Deployment
			if !one(t, k, "Deployment", &d) {
				t.FailNow()
			}
			args := d.Spec.Template.Spec.Containers[0].Args
			if slices.ContainsFunc(args, func(a string) bool {
				return strings.HasPrefix(a, "--cert-rotation") || strings.HasPrefix(a, "--webhook-secret")
			}) || !slices.Contains(args, "--webhook-configuration=holdfast") {
				t.Errorf("args %v: want no rotation of holdfast's own and the rest kept", args)
			}
			if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Secret != nil && v.Secret.SecretName == "holdfast-webhook-cert"
			}) {
				t.Error("the Deployment no longer serves the Secret the serving Certificate writes")
			}
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			if !one(t, k, "ValidatingWebhookConfiguration", &vwc) {
				t.FailNow()
			}
			if got, want := vwc.Annotations["cert-manager.io/inject-ca-from"], ns+"/holdfast-webhook-cert"; got != want {
				t.Errorf("cert-manager.io/inject-ca-from %q, want %q", got, want)
			}
		})
	}
}
