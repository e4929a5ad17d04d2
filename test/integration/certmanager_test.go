//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/charts"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// certManagerVersion is the cert-manager release whose CRDs the chart's cert-manager mode
// is held to. Its module is read from the Go module cache (`go mod download`), not
// required by go.mod: holdfast needs its CRDs' YAML, not its code.
const certManagerVersion = "v1.21.2"

// certManagerCRDs renders cert-manager's own Helm chart with crds.enabled, as its
// releases ship their CRDs, and returns those of the cert-manager.io group.
func certManagerCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/cert-manager/cert-manager@"+certManagerVersion).Output()
	if err != nil {
		t.Fatalf("go mod download cert-manager %s: %v", certManagerVersion, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download cert-manager: no directory in %s (%v)", out, err)
	}
	objs, err := charts.RenderChart(filepath.Join(m.Dir, "deploy", "charts", "cert-manager"), "cert-manager", "cert-manager",
		map[string]any{"crds": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	var crds []*unstructured.Unstructured
	var names []string
	for _, u := range objs {
		if g, _, _ := unstructured.NestedString(u.Object, "spec", "group"); u.GetKind() == "CustomResourceDefinition" && g == "cert-manager.io" {
			crds = append(crds, u)
			names = append(names, u.GetName())
		}
	}
	for _, want := range []string{"certificates.cert-manager.io", "issuers.cert-manager.io", "clusterissuers.cert-manager.io"} {
		if !slices.Contains(names, want) {
			t.Fatalf("cert-manager %s renders no CRD %s (only %v)", certManagerVersion, want, names)
		}
	}
	return crds
}

// installCertManagerCRDs creates cert-manager's CRDs in the API server and waits until it
// serves them.
func installCertManagerCRDs(t *testing.T) {
	t.Helper()
	admin, err := client.New(restConfig, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range certManagerCRDs(t) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			t.Fatal(err)
		}
		installCRD(t, admin, crd)
	}
}

// installCRD creates crd through admin (a client whose scheme knows CRDs) and waits until
// the API server serves it.
func installCRD(t *testing.T, admin client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("CRD %s: %v", crd.Name, err)
	}
	eventually(t, "CRD "+crd.Name+" established", func() bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if admin.Get(ctx, client.ObjectKeyFromObject(crd), got) != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// TestCertManagerMode creates what the chart renders with certificates.mode=cert-manager
// in the real API server, under cert-manager's own CRDs (its schema, validated by the API
// server), and checks the chain the chart describes on what the API server stored: a
// self-signed Issuer signs a CA Certificate, an Issuer of that CA's Secret signs the
// serving Certificate for the webhook Service, the Deployment serves that Certificate's
// Secret, and the webhook configuration asks cert-manager to inject the CA of that very
// Certificate (cert-manager.io/inject-ca-from). cert-manager's controllers and its own
// validating webhook do not run here: issuance, injection and rotation are not exercised
// (docs/install.md, "Certificates").
func TestCertManagerMode(t *testing.T) {
	installCertManagerCRDs(t)
	ctx := context.Background()

	t.Run("two tiers", func(t *testing.T) {
		ns := createNamespace(t, nil)
		objs := renderCertManagerMode(t, ns, nil)
		stored := createCertManagerObjects(t, objs)
		spec := func(kind, name string, path ...string) any {
			u := stored[kind+"/"+name]
			if u == nil {
				t.Fatalf("no %s %s among %v", kind, name, keysOf(stored))
			}
			v, _, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"spec"}, path...)...)
			return v
		}
		if len(stored) != 4 {
			t.Fatalf("want two Issuers and two Certificates, got %v", keysOf(stored))
		}
		if spec("Issuer", "holdfast-selfsigned", "selfSigned") == nil {
			t.Error("Issuer holdfast-selfsigned is not self-signed")
		}
		// The CA: signed by the self-signed Issuer, a CA, keeping its key when renewed.
		if spec("Certificate", "holdfast-ca", "isCA") != true {
			t.Error("Certificate holdfast-ca is not a CA")
		}
		ref := func(name string) map[string]any {
			r, _ := spec("Certificate", name, "issuerRef").(map[string]any)
			return r
		}
		if r := ref("holdfast-ca"); r["name"] != "holdfast-selfsigned" || r["kind"] != "Issuer" {
			t.Errorf("Certificate holdfast-ca is issued by %v, want the Issuer holdfast-selfsigned", r)
		}
		if got := spec("Certificate", "holdfast-ca", "privateKey", "rotationPolicy"); got != "Never" {
			t.Errorf("the CA's privateKey.rotationPolicy is %v: renewing it would change the key the served certificates chain to", got)
		}
		caSecret := spec("Certificate", "holdfast-ca", "secretName")
		if got := spec("Issuer", "holdfast-ca", "ca", "secretName"); got != caSecret || caSecret == nil {
			t.Errorf("Issuer holdfast-ca signs with Secret %v, the CA Certificate writes %v", got, caSecret)
		}
		// The serving certificate: signed by the CA's Issuer, not a CA itself.
		if r := ref("holdfast-webhook-cert"); r["name"] != "holdfast-ca" || r["kind"] != "Issuer" {
			t.Errorf("the serving Certificate is issued by %v, want the Issuer holdfast-ca", r)
		}
		if isCA := spec("Certificate", "holdfast-webhook-cert", "isCA"); isCA == true {
			t.Error("the serving Certificate is a CA")
		}
		checkServing(t, ns, objs, stored)
	})

	t.Run("an issuer of your own", func(t *testing.T) {
		ns := createNamespace(t, nil)
		own := map[string]any{"name": "platform-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
		objs := renderCertManagerMode(t, ns, own)
		stored := createCertManagerObjects(t, objs)
		if len(stored) != 1 {
			t.Fatalf("want the serving Certificate alone, got %v", keysOf(stored))
		}
		r, _, _ := unstructured.NestedStringMap(stored["Certificate/holdfast-webhook-cert"].Object, "spec", "issuerRef")
		if r["name"] != "platform-ca" || r["kind"] != "ClusterIssuer" || r["group"] != "cert-manager.io" {
			t.Errorf("the serving Certificate is issued by %v, want %v", r, own)
		}
		checkServing(t, ns, objs, stored)
	})

	// The kustomize component in a namespace of its own: the same chain, accepted by the
	// same schema, tied to the Deployment and webhook configuration kustomize renders.
	t.Run("the kustomize component", func(t *testing.T) {
		ns := createNamespace(t, nil)
		objs, err := charts.Overlay(t.TempDir(), "resources:\n  - {config}/default\nnamespace: "+ns+
			"\ncomponents:\n  - {config}/certmanager\ntransformers:\n  - {config}/namespace\n  - {config}/certmanager/namespace\n")
		if err != nil {
			t.Fatal(err)
		}
		stored := createCertManagerObjects(t, objs)
		if len(stored) != 4 {
			t.Fatalf("want two Issuers and two Certificates, got %v", keysOf(stored))
		}
		checkServing(t, ns, objs, stored)
	})

	// The schema is enforced: the same Certificate without an issuer, or with isCA as a
	// string, is refused by the API server, so the objects above passed a real check.
	t.Run("cert-manager's schema refuses a broken Certificate", func(t *testing.T) {
		ns := createNamespace(t, nil)
		for name, breakIt := range map[string]func(u *unstructured.Unstructured){
			"no issuerRef": func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "issuerRef") },
			"isCA a string": func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "yes", "spec", "isCA")
			},
			"no secretName": func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "secretName") },
		} {
			for _, u := range renderCertManagerMode(t, ns, nil) {
				if u.GetKind() == "Certificate" && u.GetName() == "holdfast-webhook-cert" {
					breakIt(u)
					if err := k8s.Create(ctx, u, client.DryRunAll); !apierrors.IsInvalid(err) {
						t.Errorf("%s: the API server answered %v, want Invalid", name, err)
					}
				}
			}
		}
	})
}

// renderCertManagerMode renders the chart in ns with certificates.mode=cert-manager and
// issuerRef (nil: the chart's own two tiers).
func renderCertManagerMode(t *testing.T, ns string, issuerRef map[string]any) []*unstructured.Unstructured {
	t.Helper()
	cm := map[string]any{}
	if issuerRef != nil {
		cm["issuerRef"] = issuerRef
	}
	objs, err := charts.Render(ns, map[string]any{"certificates": map[string]any{"mode": "cert-manager", "certManager": cm}})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// createCertManagerObjects creates the rendered Issuers and Certificates and returns them
// as the API server stored them, by kind/name.
func createCertManagerObjects(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	stored := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		if u.GetAPIVersion() != "cert-manager.io/v1" {
			continue
		}
		if err := k8s.Create(context.Background(), u); err != nil {
			t.Fatalf("%s %s: refused under cert-manager %s's CRDs: %v", u.GetKind(), u.GetName(), certManagerVersion, err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), got); err != nil {
			t.Fatal(err)
		}
		stored[u.GetKind()+"/"+u.GetName()] = got
	}
	return stored
}

// checkServing checks what ties the serving Certificate to holdfast: the Deployment serves
// its Secret, its names are the webhook Service's, and the webhook configuration (dry-run
// created in the API server) asks cert-manager to inject the CA of this Certificate and
// carries no caBundle of its own.
func checkServing(t *testing.T, ns string, objs []*unstructured.Unstructured, stored map[string]*unstructured.Unstructured) {
	t.Helper()
	cert := stored["Certificate/holdfast-webhook-cert"]
	if cert == nil {
		t.Fatalf("no serving Certificate among %v", keysOf(stored))
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	var vwcs int
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == secret }) {
				t.Errorf("the Deployment mounts no Secret %s, which the serving Certificate writes", secret)
			}
		case "ValidatingWebhookConfiguration":
			vwcs++
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
				t.Fatal(err)
			}
			if got, want := c.Annotations["cert-manager.io/inject-ca-from"], ns+"/"+cert.GetName(); got != want {
				t.Errorf("%s: cert-manager.io/inject-ca-from %q, want %q (the serving Certificate)", c.Name, got, want)
			}
			for _, w := range c.Webhooks {
				s := w.ClientConfig.Service
				if s == nil || s.Namespace != ns || len(w.ClientConfig.CABundle) > 0 {
					t.Errorf("%s/%s: clientConfig %+v, want the Service in %s and no caBundle (cert-manager injects it)", c.Name, w.Name, w.ClientConfig, ns)
					continue
				}
				if host := s.Name + "." + s.Namespace + ".svc"; !slices.Contains(dnsNames, host) {
					t.Errorf("%s/%s calls %s, which the serving Certificate (%v) does not name", c.Name, w.Name, host, dnsNames)
				}
			}
			apart(u)
			if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
				t.Errorf("%s: %v", u.GetName(), err)
			}
		}
	}
	if vwcs == 0 {
		t.Error("the chart renders no ValidatingWebhookConfiguration")
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
