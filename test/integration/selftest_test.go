//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/charts"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/selftest"
	"github.com/holdfast-dev/holdfast/internal/interception"
)

// The self-test makes the real API server call the policy webhook and the entries the
// leader derived for a RolloutPolicy and a DisruptionPolicy; each answers, and nothing
// the probes name is created.
func TestSelfTestProbesEveryEntry(t *testing.T) {
	ctx := context.Background()
	ns, rp, dp := selfTestPolicies(t)
	results, err := selftest.Run(ctx, restConfig, "holdfast", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	selftest.Print(&table, results)
	t.Log("\n" + table.String())
	if bad := notOK(ns, rp, dp, results); len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
	selfTestLeftNothing(t, ns)
}

// selfTestPolicies are a RolloutPolicy and a DisruptionPolicy (PDBs generated) over a new
// namespace, intercepted.
func selfTestPolicies(t *testing.T) (string, *v1alpha1.RolloutPolicy, *v1alpha1.DisruptionPolicy) {
	t.Helper()
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
	return ns, rp, dp
}

// notOK says what is wrong with the results for the policy entry and the policies'
// rollout, eviction and PDB entries: each must be OK, with a probe in ns.
func notOK(ns string, rp *v1alpha1.RolloutPolicy, dp *v1alpha1.DisruptionPolicy, results []selftest.Result) []string {
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
		return []string{fmt.Sprintf("want the policy entry and the rollout, eviction and PDB entries of the two policies, found %v in %+v", want, results)}
	}
	var bad []string
	for entry, probe := range want {
		r := got[entry]
		if r.Status != selftest.OK || !strings.Contains(r.Probe, probe) {
			bad = append(bad, fmt.Sprintf("entry %s: %s %q (%s), want OK with a probe of %s", entry, r.Status, r.Reason, r.Probe, probe))
		}
	}
	return bad
}

// selfTestLeftNothing checks that the probes were dry runs: nothing named after them exists.
func selfTestLeftNothing(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
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

// The chart's `helm test` identity (its ServiceAccount, ClusterRole and the
// ValidatingAdmissionPolicy that lets it send dry runs only, as rendered) runs the
// self-test to the same results as an administrator, and cannot create what it probes.
func TestSelfTestRunsWithTheChartsIdentity(t *testing.T) {
	ctx := context.Background()
	objs, err := charts.Render(holdfastNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for _, u := range objs {
		if u.GetAnnotations()["helm.sh/hook"] != "test" || u.GetKind() == "Pod" {
			continue
		}
		if u.GetKind() == "ServiceAccount" {
			user = "system:serviceaccount:" + u.GetNamespace() + ":" + u.GetName()
		}
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, u) })
	}
	if user == "" {
		t.Fatal("the chart renders no self-test ServiceAccount")
	}
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + holdfastNamespace, "system:authenticated"}}
	ns, rp, dp := selfTestPolicies(t)

	// RBAC and the admission policy take effect once the API server's informers see them.
	var bad []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		results, err := selftest.Run(ctx, cfg, "holdfast", 10*time.Second)
		if err != nil {
			bad = []string{err.Error()}
		} else if bad = notOK(ns, rp, dp, results); len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("as %s:\n%s", user, strings.Join(bad, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	selfTestLeftNothing(t, ns)

	as, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	other := createNamespace(t, nil)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "not-a-dry-run"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "registry.k8s.io/pause:3.10"}}}}}}
	// The admission policy and its binding reach the API server's informers on their own
	// schedule, independent of RBAC: until both are seen, a create is let through, so the
	// refusal is awaited (and anything created on the way removed).
	refused := func(err error) bool {
		return err != nil && (apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) && strings.Contains(err.Error(), "may only send dry runs")
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		err = as.Create(ctx, d.DeepCopy())
		if err == nil {
			if err := k8s.Delete(ctx, d); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		if refused(err) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !refused(err) {
		t.Errorf("a create that is not a dry run, as %s: got %v, want the admission policy's refusal", user, err)
	}
	if err := as.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "x"}}, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("a dry-run create of a ConfigMap as %s: got %v, want Forbidden by RBAC", user, err)
	}
}
