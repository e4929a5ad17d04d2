//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/charts"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/hack/crds"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// newField is the field the "previous" chart's CRD lacks in these tests: a DisruptionPolicy's
// spec.maxHold, optional and read by no validation rule.
const newField = "maxHold"

// disruptionCRD is the DisruptionPolicy CRD's file in the chart and in config/crd/bases.
const disruptionCRD = "holdfast.dev_disruptionpolicies.yaml"

// withoutNewField returns the CRD file raw without spec.maxHold in any version.
func withoutNewField(t *testing.T, raw []byte) []byte {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if _, ok := spec.Properties[newField]; !ok {
			t.Fatalf("the CRD has no spec.%s to take out", newField)
		}
		delete(spec.Properties, newField)
		// and the rules over the spec that read it, which a schema without it cannot compile.
		spec.XValidations = slices.DeleteFunc(spec.XValidations, func(r apiextensionsv1.ValidationRule) bool {
			return strings.Contains(r.Rule, "self."+newField)
		})
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	out, err := yaml.Marshal(&crd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmConfig is Helm's action configuration for the envtest API server (as an
// administrator, through a kubeconfig written from restConfig), keeping releases in
// memory.
func helmConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData,
		Token: restConfig.BearerToken}
	kubeconfig.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: ns}
	kubeconfig.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &path, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "memory", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// loadChart loads the chart, with the DisruptionPolicy CRD edited by edit when it is set.
func loadChart(t *testing.T, edit func(*testing.T, []byte) []byte) *chart.Chart {
	t.Helper()
	c, err := loader.Load(charts.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		return c
	}
	for _, f := range c.Files {
		if f.Name == "files/crds/"+disruptionCRD {
			f.Data = edit(t, f.Data)
			return c
		}
	}
	t.Fatalf("the chart has no files/crds/%s", disruptionCRD)
	return nil
}

// waitNewField waits until the API server keeps spec.maxHold of a DisruptionPolicy (the
// CRD in force has the field) or prunes it, by a server-side dry run.
func waitNewField(t *testing.T, kept bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p := probePolicy("crd-probe-")
		err := k8s.Create(context.Background(), p, client.DryRunAll)
		if err == nil && (p.Spec.MaxHold != nil) == kept {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server did not follow the CRD (want spec.%s kept: %t): stored %+v, %v", newField, kept, p.Spec.MaxHold, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probePolicy is a DisruptionPolicy that sets spec.maxHold and selects nothing that exists.
func probePolicy(generateName string) *v1alpha1.DisruptionPolicy {
	return &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: generateName},
		Spec: v1alpha1.DisruptionPolicySpec{MaxHold: &metav1.Duration{Duration: 20 * time.Minute}, Mode: v1alpha1.ModeWarn,
			Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"crd-upgrade": "nothing"}}}}}
}

// crdClient is an administrator's client that knows CustomResourceDefinitions.
func crdClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(restConfig, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// restoreCRDs puts config/crd/bases back as the suite installed them (the chart's release
// metadata taken off), and waits until the API server serves spec.maxHold again.
func restoreCRDs(t *testing.T) {
	t.Helper()
	ctx, admin := context.Background(), crdClient(t)
	files, err := crds.Read(filepath.Join("..", "..", crds.Dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		want := f.CRD
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := admin.Get(ctx, client.ObjectKey{Name: want.Name}, crd); err != nil {
				return err
			}
			crd.Spec, crd.Labels, crd.Annotations = want.Spec, want.Labels, want.Annotations
			return admin.Update(ctx, crd)
		})
		if err != nil {
			t.Errorf("restoring the CRD %s: %v", want.Name, err)
		}
	}
	waitNewField(t, true)
}

// TestChartUpgradeAppliesNewCRDFields upgrades the chart with Helm's own actions
// (action.Install, Upgrade, Rollback, Uninstall) against the real API server, from a
// chart whose DisruptionPolicy CRD lacks spec.maxHold (the previous schema) to the
// current chart. Under the previous schema the API server prunes the field; after
// `helm upgrade` it keeps it, and the policy stored before reads on. A rollback is not
// blocked, an upgrade with crds.install=false and the uninstall leave the CRDs (keep) and
// the policy, and the uninstall removes the webhook configuration.
func TestChartUpgradeAppliesNewCRDFields(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	cfg := helmConfig(t, ns)
	const release = "crd-upgrade"
	t.Cleanup(func() {
		_, _ = action.NewUninstall(cfg).Run(release)
		restoreCRDs(t)
	})

	// The previous chart. The suite installed the CRDs without Helm; the first install
	// adopts them (helm install --take-ownership), as an install over CRDs applied by hand
	// would have to.
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.TakeOwnership = release, ns, true
	if _, err := install.RunWithContext(ctx, loadChart(t, withoutNewField), nil); err != nil {
		t.Fatalf("helm install of the previous chart: %v", err)
	}
	waitNewField(t, false)

	stored := probePolicy("crd-upgrade-")
	if err := k8s.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), stored) })
	if stored.Spec.MaxHold != nil {
		t.Fatalf("the previous schema kept spec.%s: the test upgrades nothing", newField)
	}

	// helm upgrade to the current chart applies the current CRDs.
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = ns
	if _, err := upgrade.RunWithContext(ctx, release, loadChart(t, nil), nil); err != nil {
		t.Fatalf("helm upgrade to the current chart: %v", err)
	}
	waitNewField(t, true)
	got := &v1alpha1.DisruptionPolicy{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stored), got); err != nil {
		t.Fatalf("the policy stored before the upgrade does not read: %v", err)
	}
	if got.Spec.Mode != v1alpha1.ModeWarn || got.Spec.Targets.Selector.MatchLabels["crd-upgrade"] != "nothing" {
		t.Errorf("the policy stored before the upgrade reads as %+v", got.Spec)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(stored), got); err != nil {
			return err
		}
		got.Spec.MaxHold = &metav1.Duration{Duration: 20 * time.Minute}
		return k8s.Update(ctx, got)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stored), got); err != nil || got.Spec.MaxHold == nil || got.Spec.MaxHold.Duration != 20*time.Minute {
		t.Errorf("after helm upgrade, spec.%s of the stored policy reads %v (%v), want 20m kept", newField, got.Spec.MaxHold, err)
	}
	admin := crdClient(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "disruptionpolicies.holdfast.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations["meta.helm.sh/release-name"] != release || crd.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the CRD's annotations %v: want it in the release, and kept", crd.Annotations)
	}

	// helm rollback to the previous chart is not blocked by the CRDs (it applies the
	// previous schema back); the policy still reads. Then up again.
	rollback := action.NewRollback(cfg)
	rollback.Version = 1
	if err := rollback.Run(release); err != nil {
		t.Fatalf("helm rollback to the previous chart: %v", err)
	}
	waitNewField(t, false)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stored), got); err != nil {
		t.Errorf("after the rollback the policy does not read: %v", err)
	}
	if _, err := upgrade.RunWithContext(ctx, release, loadChart(t, nil), nil); err != nil {
		t.Fatalf("helm upgrade after the rollback: %v", err)
	}
	waitNewField(t, true)

	// An upgrade that stops rendering the CRDs (they are managed elsewhere from now on)
	// leaves them: keep.
	if _, err := upgrade.RunWithContext(ctx, release, loadChart(t, nil), map[string]any{"crds": map[string]any{"install": false}}); err != nil {
		t.Fatalf("helm upgrade with crds.install=false: %v", err)
	}
	for _, name := range []string{"disruptionpolicies.holdfast.dev", "rolloutpolicies.holdfast.dev"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil || crd.DeletionTimestamp != nil {
			t.Errorf("after an upgrade with crds.install=false, the CRD %s: %v, deleting %v", name, err, crd.DeletionTimestamp)
		}
	}

	// helm uninstall (from a release that renders them again) leaves the CRDs and the
	// policies, and takes the webhook configuration.
	if _, err := upgrade.RunWithContext(ctx, release, loadChart(t, nil), nil); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if _, err := action.NewUninstall(cfg).Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, name := range []string{"disruptionpolicies.holdfast.dev", "rolloutpolicies.holdfast.dev"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil || crd.DeletionTimestamp != nil {
			t.Errorf("after helm uninstall, the CRD %s: %v, deleting %v", name, err, crd.DeletionTimestamp)
		}
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stored), got); err != nil {
		t.Errorf("after helm uninstall the policy does not read: %v", err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: release + "-holdfast"}, vwc); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, the webhook configuration %s-holdfast: %v", release, err)
	}
}

// TestCRDCheckReportsAnOlderSchema runs the start-up check (app.CRDCheck) as holdfast's
// service account, with its generated RBAC, against the real API server: with the
// DisruptionPolicy CRD of the previous schema installed, it names spec.maxHold, sets
// holdfast_crds_outdated to 1 and leaves a Warning Event on the CRD; with the current CRDs
// it reports nothing.
func TestCRDCheckReportsAnOlderSchema(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { restoreCRDs(t) })
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", disruptionCRD))
	if err != nil {
		t.Fatal(err)
	}
	var older apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(withoutNewField(t, raw), &older); err != nil {
		t.Fatal(err)
	}
	admin := crdClient(t)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: older.Name}, crd); err != nil {
			return err
		}
		crd.Spec = older.Spec
		return admin.Update(ctx, crd)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitNewField(t, false)

	holdfast := rest.CopyConfig(restConfig)
	holdfast.Impersonate = rest.ImpersonationConfig{UserName: holdfastUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:holdfast-system", "system:authenticated"}}
	reader, err := app.NewCRDReader(holdfast)
	if err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(holdfast)
	if err != nil {
		t.Fatal(err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	stop := make(chan struct{})
	broadcaster.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); broadcaster.Shutdown() })
	gauge, err := app.NewCRDsOutdated(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	check := &app.CRDCheck{Reader: reader, Events: broadcaster.NewRecorder(harness.NewScheme(), "holdfast"), Outdated: gauge, Log: logr.Discard()}

	missing, err := check.Check(ctx)
	if err != nil {
		t.Fatalf("the check as holdfast's service account: %v", err)
	}
	if want := []string{"v1alpha1 spec." + newField}; len(missing) != 1 || strings.Join(missing["disruptionpolicies.holdfast.dev"], ",") != strings.Join(want, ",") {
		t.Errorf("missing %v, want disruptionpolicies.holdfast.dev: %v", missing, want)
	}
	if v := gaugeValue(t, gauge); v != 1 {
		t.Errorf("holdfast_crds_outdated %v, want 1", v)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range list.Items {
			found = found || (e.Reason == app.ReasonCRDsOutdated && e.Type == "Warning" && e.Regarding.Name == "disruptionpolicies.holdfast.dev" &&
				strings.Contains(e.Note, "spec."+newField))
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Warning %s Event on the CRD among %d Events in default", app.ReasonCRDsOutdated, len(list.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}

	restoreCRDs(t)
	if missing, err := check.Check(ctx); err != nil || len(missing) != 0 {
		t.Errorf("with the current CRDs: missing %v, %v", missing, err)
	}
	if v := gaugeValue(t, gauge); v != 0 {
		t.Errorf("holdfast_crds_outdated %v with the current CRDs, want 0", v)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
