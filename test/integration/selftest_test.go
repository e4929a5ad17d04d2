//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/selftest"
	"github.com/holdfast-dev/holdfast/internal/interception"
)

// The self-test makes the real API server call the policy webhook and the entries the
// leader derived for a RolloutPolicy and a DisruptionPolicy; each answers, and nothing
// the probes name is created.
func TestSelfTestProbesEveryEntry(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	rp := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "selftest-"}, Spec: v1alpha1.RolloutPolicySpec{
		Mode: v1alpha1.ModeEnforce,
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}, NamespaceSelector: namespaceNamed(ns),
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}}}}},
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}},
	}}
	maxUnavailable := intstr.FromInt32(1)
	dp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "selftest-"}, Spec: v1alpha1.DisruptionPolicySpec{
		MaxUnavailable: &maxUnavailable, PDB: &v1alpha1.PDBGeneration{Generate: true},
		Targets: v1alpha1.PodTargets{NamespaceSelector: namespaceNamed(ns), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "agent"}}}}}
	for _, p := range []client.Object{rp, dp} {
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, p) })
		intercepted(t, p)
	}

	results, err := selftest.Run(ctx, restConfig, "holdfast", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]selftest.Result{}
	for _, r := range results {
		got[r.Entry] = r
	}
	want := map[string]string{"validation.holdfast.dev": "RolloutPolicy"}
	for _, r := range results {
		switch {
		case strings.HasPrefix(r.Entry, rp.Name+"-") && strings.HasSuffix(r.Entry, interception.TypeRollout):
			want[r.Entry] = "Deployment " + ns + "/"
		case strings.HasPrefix(r.Entry, dp.Name+"-") && strings.HasSuffix(r.Entry, interception.TypeEviction):
			want[r.Entry] = "eviction of pod " + ns + "/"
		case strings.HasPrefix(r.Entry, dp.Name+"-") && strings.HasSuffix(r.Entry, interception.TypeFloor):
			want[r.Entry] = "PodDisruptionBudget " + ns + "/"
		}
	}
	if len(want) != 4 {
		t.Fatalf("want the policy entry and the rollout, eviction and PDB entries of the two policies, found %v in %+v", want, results)
	}
	for entry, probe := range want {
		r := got[entry]
		if r.Status != selftest.OK || !strings.Contains(r.Probe, probe) {
			t.Errorf("entry %s: %s %q (%s), want OK with a probe of %s", entry, r.Status, r.Reason, r.Probe, probe)
		}
	}

	// Dry runs only: nothing named after the probe exists.
	for _, obj := range []client.Object{&appsv1.Deployment{}, &policyv1.PodDisruptionBudget{}} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: app.SelfTestName}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s/%s: want NotFound after the self-test, got %v", obj, ns, app.SelfTestName, err)
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: app.SelfTestName}, &v1alpha1.RolloutPolicy{}); !apierrors.IsNotFound(err) {
		t.Errorf("RolloutPolicy %s: want NotFound after the self-test, got %v", app.SelfTestName, err)
	}
}

// Entries whose webhook does not answer FAIL, with the API server's reason, and the
// command exits 1: one that fails open (the probe is admitted) and one that fails closed.
func TestSelfTestFailsEntriesThatDoNotAnswer(t *testing.T) {
	ctx := context.Background()
	nsIgnore, nsFail := createNamespace(t, nil), createNamespace(t, nil)
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "https://" + l.Addr().String()
	_ = l.Close()

	real := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "holdfast"}, real); err != nil {
		t.Fatal(err)
	}
	entry := func(name, path string, fp admissionregistrationv1.FailurePolicyType, ns string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(down + path), CABundle: real.Webhooks[0].ClientConfig.CABundle},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			FailurePolicy:           ptr.To(fp),
			TimeoutSeconds:          ptr.To[int32](2),
			NamespaceSelector:       namespaceNamed(ns),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
		}
	}
	const anchor = "selftest-down"
	for _, vwc := range []*admissionregistrationv1.ValidatingWebhookConfiguration{
		{ObjectMeta: metav1.ObjectMeta{Name: anchor}},
		{ObjectMeta: metav1.ObjectMeta{Name: interception.Name(anchor)}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
			entry("open.eviction.holdfast.dev", interception.EvictionPath, admissionregistrationv1.Ignore, nsIgnore),
			entry("closed.eviction.holdfast.dev", interception.EvictionPath, admissionregistrationv1.Fail, nsFail),
		}},
	} {
		if err := k8s.Create(ctx, vwc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, vwc) })
	}
	time.Sleep(300 * time.Millisecond) // the API server follows its webhook configurations by watch

	results, err := selftest.Run(ctx, restConfig, anchor, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"open.eviction.holdfast.dev":   "the probe was admitted",
		"closed.eviction.holdfast.dev": "failed calling webhook",
	}
	if len(results) != len(want) {
		t.Fatalf("want one result per entry, got %+v", results)
	}
	for _, r := range results {
		if r.Status != selftest.Fail || !strings.Contains(r.Reason, want[r.Entry]) {
			t.Errorf("entry %s: %s %q, want FAIL with %q", r.Entry, r.Status, r.Reason, want[r.Entry])
		}
	}

	// The command prints every entry and exits 1.
	cmd := selftest.NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--kubeconfig", writeKubeconfig(t), "--webhook-configuration", anchor})
	err = cmd.ExecuteContext(ctx)
	var ee *app.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("want exit code 1, got %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "FAIL "); n != 2 {
		t.Errorf("want 2 FAIL lines, got %d:\n%s", n, out.String())
	}
}

// writeKubeconfig writes the administrator's rest.Config as a kubeconfig file.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData, Token: restConfig.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
