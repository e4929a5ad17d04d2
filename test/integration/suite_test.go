//go:build integration

// Package integration runs holdfast's webhooks in-process against a real kube-apiserver
// and etcd (envtest, with KUBEBUILDER_ASSETS pointing at the test bed's binaries): the
// API server calls the webhooks over TLS, and the tests observe the answers through
// client-go, as a user would.
package integration

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/podscope"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

var (
	// k8s is a client of the real API server whose admission warnings are recorded.
	k8s      client.Client
	warnings = &warningRecorder{}
	// cached reads what holdfast's decisions read: the manager's informer caches.
	cached client.Reader
	// restConfig reaches the API server as an administrator.
	restConfig *rest.Config
	// webhookServer is holdfast's, counting the requests it is sent.
	webhookServer *countingServer
	// webhookHost and webhookPort are where holdfast's webhook server listens.
	webhookHost string
	webhookPort int
	// auditLogPath is the API server's audit log (every request's metadata, the webhooks'
	// audit annotations).
	auditLogPath string
	// metricsRegistry holds holdfast's metrics.
	metricsRegistry *prometheus.Registry
	// podScope is holdfast's pod cache, scoped to the guarded workloads.
	podScope *podscope.Scope
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS must point at kube-apiserver and etcd: run `make test-integration`")
		return 1
	}
	ctrl.SetLogger(zapr.NewLogger(zap.NewNop()))

	vwc, err := webhookConfiguration()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc},
		},
	}
	auditDir, err := os.MkdirTemp("", "holdfast-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	auditLog, err := enableAudit(env, auditDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	auditLogPath = auditLog
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	if err := createHoldfastNamespace(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// holdfast runs as its service account, bound to the generated roles.
	holdfastCfg, err := installRBAC(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "installing config/rbac:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wio := &env.WebhookInstallOptions
	webhookHost, webhookPort = wio.LocalServingHost, wio.LocalServingPort
	webhookServer = &countingServer{Server: app.WebhookServer(ctx, wio.LocalServingHost, wio.LocalServingPort, wio.LocalServingCertDir)}
	metricsRegistry = prometheus.NewRegistry()
	shared, err := app.NewShared(metricsRegistry)
	if err != nil {
		fmt.Fprintln(os.Stderr, "building holdfast's shared values:", err)
		return 1
	}
	mgr, err := ctrl.NewManager(holdfastCfg, ctrl.Options{
		Scheme:                 informer.NewScheme(),
		Cache:                  app.CacheOptions(holdfastNamespace, shared.Writers),
		NewCache:               shared.Pods.NewCache,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhookServer,
	})
	if err == nil {
		err = app.Setup(ctx, mgr, app.Options{Namespace: holdfastNamespace, Identity: "integration", LedgerSweepEvery: time.Second,
			Webhooks: app.WebhookOptions{Anchor: vwc.Name, NarrowAfter: 500 * time.Millisecond,
				Rollout:  interception.Defaults{FailurePolicy: admissionregistrationv1.Fail},
				Eviction: interception.Defaults{FailurePolicy: admissionregistrationv1.Fail}}}, shared)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setting up holdfast:", err)
		return 1
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	})
	defer wg.Wait()
	defer cancel()
	if err := waitForTLS(net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cached = mgr.GetCache()
	podScope = shared.Pods
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "caches did not sync")
		return 1
	}

	restConfig = cfg
	userCfg := rest.CopyConfig(cfg)
	userCfg.WarningHandler = warnings
	if k8s, err = client.New(userCfg, client.Options{Scheme: informer.NewScheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	wholeSuite := flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == ""
	if err := checkRBACAgainstAudit(wholeSuite); err != nil {
		fmt.Println("--- FAIL: RBAC against the audit log:", err)
		return 1
	}
	return code
}

// webhookConfiguration is the generated configuration, named as config/ names it (holdfast's
// RBAC names it), with failurePolicy Fail, so that a webhook that does not answer fails the
// tests instead of letting requests through. holdfast's leader derives the guarded entries
// from it, with failurePolicy Fail too.
func webhookConfiguration() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(raw, vwc); err != nil {
		return nil, fmt.Errorf("reading the generated webhook configuration: %w", err)
	}
	vwc.Name = "holdfast"
	fail := admissionregistrationv1.Fail
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].FailurePolicy = &fail
	}
	return vwc, nil
}

func waitForTLS(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that the server listens
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server at %s did not come up: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// warningRecorder keeps the admission warnings the API server passes back.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings seen since the last call and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// createNamespace makes a namespace for one test, removed when it ends.
func createNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-", Labels: labels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// guardedNamespace is a new namespace under a RolloutPolicy of its own, named name and
// with the rules rules sets.
func guardedNamespace(t *testing.T, name string, rules func(*v1alpha1.RolloutRules)) string {
	t.Helper()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy(name).Obj()
	rules(&p.Spec.Rules)
	applyPolicy(t, ns, p)
	return ns
}

// createKas creates the Deployment kas in the namespace (opts name its field manager) and
// the ReplicaSet of its first revision, as kube's Deployment controller would.
func createKas(t *testing.T, ns string, opts ...client.CreateOption) *appsv1.Deployment {
	t.Helper()
	d := utiltesting.MakeDeployment(ns, "kas").Obj()
	if err := k8s.Create(context.Background(), d, opts...); err != nil {
		t.Fatal(err)
	}
	addRevision(t, d, "1")
	return d
}

// rollTo updates d to a new image (opts name its field manager) and adds the ReplicaSet
// of revision n, as kube's Deployment controller would.
func rollTo(t *testing.T, d *appsv1.Deployment, image, n string, opts ...client.UpdateOption) *appsv1.Deployment {
	t.Helper()
	next := withImage(d, image)
	if err := k8s.Update(context.Background(), next, opts...); err != nil {
		t.Fatalf("rolling %s/%s to %s: %v", d.Namespace, d.Name, image, err)
	}
	addRevision(t, next, n)
	return next
}

// grantRole binds the users to a Role of these rules in the namespace, both named name.
func grantRole(t *testing.T, ns, name string, rules []rbacv1.PolicyRule, users ...string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	if err := k8s.Create(context.Background(), role); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	for _, u := range users {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	if err := k8s.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

// intercepted waits until the API server sends what the policy guards to holdfast: the
// leader has derived its webhook entries from its generation, which it read from the cache
// the webhooks read.
func intercepted(t *testing.T, p client.Object) {
	t.Helper()
	if err := harness.WaitIntercepted(context.Background(), k8s, p); err != nil {
		t.Fatal(err)
	}
}

// namespaceNamed selects one namespace by name, as policies in the tests do to stay apart.
func namespaceNamed(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// holdfastNamespace is where holdfast keeps its eviction ledgers in the tests.
const holdfastNamespace = "holdfast-system"

func createHoldfastNamespace(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: informer.NewScheme()})
	if err != nil {
		return err
	}
	return c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: holdfastNamespace}})
}

// withoutPolicyValidation runs f while the API server does not send policies to holdfast's
// validation webhook, as when holdfast is down while a policy is written (its
// failurePolicy is Ignore in production): how holdfast treats a policy it would have
// refused is tested this way.
func withoutPolicyValidation(t *testing.T, f func()) {
	t.Helper()
	ctx := context.Background()
	set := func(ops []admissionregistrationv1.OperationType) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: "holdfast"}, vwc); err != nil {
				return err
			}
			vwc.Webhooks[0].Rules[0].Operations = ops
			return k8s.Update(ctx, vwc)
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the API server follows its webhook configurations by watch
	}
	set([]admissionregistrationv1.OperationType{admissionregistrationv1.Delete})
	defer set([]admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update})
	f()
}
