package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/holdfast-dev/holdfast/internal/interception"
)

// options are the command-line settings of the holdfast server.
type options struct {
	certDir                string
	webhookHost            string
	webhookPort            int
	metricsAddr            string
	probeAddr              string
	pprofAddr              string
	namespace              string
	leaderElect            bool
	leaderElectionID       string
	leaseDuration          time.Duration
	renewDeadline          time.Duration
	retryPeriod            time.Duration
	kubeconfig             string
	logFormat              string
	logLevel               int8
	gracefulShutdownPeriod time.Duration
	shutdownDelay          time.Duration
	certRotation           bool
	webhookSecret          string
	webhookService         string
	webhookConfigName      string
	rolloutFailurePolicy   string
	rolloutTimeout         int32
	evictionFailurePolicy  string
	evictionTimeout        int32
	neverHeldDeleters      []string
}

// namespaceEnv names the environment variable the manifests fill from the downward API
// (metadata.namespace): the namespace holdfast runs in, unless --namespace says otherwise,
// so that a kustomize `namespace:` overlay needs no argument rewritten.
const namespaceEnv = "POD_NAMESPACE"

// defaultNamespace is --namespace's default: $POD_NAMESPACE, else holdfast-system.
func defaultNamespace() string {
	if ns := os.Getenv(namespaceEnv); ns != "" {
		return ns
	}
	return "holdfast-system"
}

func defaultOptions() *options {
	return &options{
		certDir:                "/tmp/k8s-webhook-server/serving-certs",
		webhookPort:            9443,
		metricsAddr:            ":8080",
		probeAddr:              ":8081",
		pprofAddr:              "0",
		namespace:              defaultNamespace(),
		leaderElect:            true,
		leaderElectionID:       "holdfast.holdfast.dev",
		leaseDuration:          15 * time.Second,
		renewDeadline:          10 * time.Second,
		retryPeriod:            2 * time.Second,
		logFormat:              "json",
		gracefulShutdownPeriod: 30 * time.Second,
		shutdownDelay:          5 * time.Second,
		webhookSecret:          "holdfast-webhook-cert",
		webhookService:         "holdfast-webhook",
		webhookConfigName:      "holdfast",
		rolloutFailurePolicy:   "Ignore",
		rolloutTimeout:         3,
		evictionFailurePolicy:  "Ignore",
		evictionTimeout:        3,
		neverHeldDeleters:      interception.DefaultNeverHeldDeleters,
	}
}

func (o *options) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.certDir, "cert-dir", o.certDir, "Directory holding the webhook serving certificate (tls.crt, tls.key); reloaded when it changes.")
	fs.StringVar(&o.webhookHost, "webhook-host", o.webhookHost, "Address the webhook server binds to; empty means all interfaces.")
	fs.IntVar(&o.webhookPort, "webhook-port", o.webhookPort, "Port of the webhook server (TLS 1.3, HTTP/1.1).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, "Address of the Prometheus metrics endpoint; \"0\" turns it off.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", o.probeAddr, "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", o.pprofAddr, "Address of Go's /debug/pprof endpoints, for profiling; \"0\" (the default) turns them off.")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "Namespace holdfast runs in: its leader-election lease lives there, and its webhooks never guard it. Default: $POD_NAMESPACE (the manifests set it from the downward API), else holdfast-system.")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "Elect one leader among replicas for the controllers; webhooks are served by every replica.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", o.leaderElectionID, "Name of the leader-election lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", o.leaseDuration, "How long a leader's lease lasts without renewal.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", o.renewDeadline, "How long the leader keeps trying to renew before giving up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", o.retryPeriod, "How often candidates try to acquire or renew the lease.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig; empty means in-cluster config or $KUBECONFIG.")
	fs.StringVar(&o.logFormat, "log-format", o.logFormat, "Log format: json, or console for human-readable lines.")
	fs.Int8Var(&o.logLevel, "v", o.logLevel, "Log verbosity: 0 logs decisions that object to a request, higher levels add detail.")
	fs.BoolVar(&o.certRotation, "cert-rotation", o.certRotation, "Issue and rotate the webhook serving certificate in --webhook-secret and inject its CA into --webhook-configuration; off when cert-manager or another tool provides the certificate.")
	fs.StringVar(&o.webhookSecret, "webhook-secret", o.webhookSecret, "Secret (in --namespace) holding the serving certificate, with --cert-rotation.")
	fs.StringVar(&o.webhookService, "webhook-service", o.webhookService, "Service (in --namespace) the API server calls the webhooks through; the certificate names it.")
	fs.StringVar(&o.webhookConfigName, "webhook-configuration", o.webhookConfigName, "The installed ValidatingWebhookConfiguration: it says how the API server reaches holdfast (--cert-rotation keeps its CA bundle current) and owns the one the leader derives from the policies, named <this>-guards.")
	fs.StringVar(&o.rolloutFailurePolicy, "rollout-failure-policy", o.rolloutFailurePolicy, "failurePolicy (Fail or Ignore) of the workload and scale webhook entries of policies that set none.")
	fs.Int32Var(&o.rolloutTimeout, "rollout-timeout-seconds", o.rolloutTimeout, "timeoutSeconds (1-30) of the workload and scale webhook entries.")
	fs.StringVar(&o.evictionFailurePolicy, "eviction-failure-policy", o.evictionFailurePolicy, "failurePolicy (Fail or Ignore) of the eviction webhook entries of policies that set none.")
	fs.StringSliceVar(&o.neverHeldDeleters, "never-held-deleters", o.neverHeldDeleters, "users whose pod DELETEs are never sent to holdfast, beside kube's own (guardDeletes): Karpenter's service account, whose deletes come at a NodeClaim's deadline.")
	fs.Int32Var(&o.evictionTimeout, "eviction-timeout-seconds", o.evictionTimeout, "timeoutSeconds (1-30) of the eviction webhook entries.")
	fs.DurationVar(&o.gracefulShutdownPeriod, "graceful-shutdown-timeout", o.gracefulShutdownPeriod, "How long to drain in-flight requests and stop runnables on SIGTERM.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", o.shutdownDelay, "On SIGTERM, how long to keep serving with readiness failing, so that Services and the API server stop sending requests before the webhook server closes.")
}

func (o *options) validate() error {
	switch o.logFormat {
	case "json", "console":
	default:
		return fmt.Errorf("--log-format must be json or console, not %q", o.logFormat)
	}
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		return fmt.Errorf("--webhook-port must be between 1 and 65535, not %d", o.webhookPort)
	}
	if o.namespace == "" {
		return fmt.Errorf("--namespace must not be empty")
	}
	for _, f := range []struct {
		name, policy string
		timeout      int32
	}{{"rollout", o.rolloutFailurePolicy, o.rolloutTimeout}, {"eviction", o.evictionFailurePolicy, o.evictionTimeout}} {
		if f.policy != "Fail" && f.policy != "Ignore" {
			return fmt.Errorf("--%s-failure-policy must be Fail or Ignore, not %q", f.name, f.policy)
		}
		if f.timeout < 1 || f.timeout > 30 {
			return fmt.Errorf("--%s-timeout-seconds must be between 1 and 30, not %d", f.name, f.timeout)
		}
	}
	if o.logLevel < 0 {
		return fmt.Errorf("-v must not be negative")
	}
	return nil
}

func (o *options) zapLevel() zapcore.Level {
	// zap levels run the other way: V(1) is debug, V(2) is one below, and so on.
	return zapcore.Level(-o.logLevel)
}
