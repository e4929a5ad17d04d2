package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/version"
)

// Leader election and the eviction ledgers read, create and update Leases; the ledgers'
// sweeper lists them and deletes idle ledgers.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=holdfast-system,resources=leases,verbs=get;list;create;update;delete

func run(_ context.Context, o *options) error {
	if err := o.validate(); err != nil {
		return err
	}
	zl, err := newZapLogger(o)
	if err != nil {
		return err
	}
	defer func() { _ = zl.Sync() }()
	log := zapr.NewLogger(zl)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	log.Info("Starting holdfast", "version", version.String())

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	shared, err := app.NewShared(metrics.Registry)
	if err != nil {
		return err
	}
	ctx, draining := shutdownContext(o.shutdownDelay, log)
	// This manager serves the webhooks, the probes and the metrics on every replica and
	// owns the caches; it never takes part in leader election, so that losing the lease
	// (to an API server outage longer than the renew deadline) cannot stop the webhooks.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  informer.NewScheme(),
		Cache:                   app.CacheOptions(o.namespace, shared.Writers),
		NewCache:                shared.Pods.NewCache,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		WebhookServer:           app.WebhookServer(ctx, o.webhookHost, o.webhookPort, o.certDir),
		GracefulShutdownTimeout: &o.gracefulShutdownPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddReadyzCheck("shutdown", func(*http.Request) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}); err != nil {
		return err
	}
	if o.certRotation {
		if err := addCertRotator(mgr, o); err != nil {
			return err
		}
	}
	identity, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the host name for this replica's identity: %w", err)
	}
	so := app.Options{Namespace: o.namespace, Identity: identity, Webhooks: app.WebhookOptions{
		Anchor:            o.webhookConfigName,
		Rollout:           interception.Defaults{FailurePolicy: admissionregistrationv1.FailurePolicyType(o.rolloutFailurePolicy), TimeoutSeconds: o.rolloutTimeout},
		Eviction:          interception.Defaults{FailurePolicy: admissionregistrationv1.FailurePolicyType(o.evictionFailurePolicy), TimeoutSeconds: o.evictionTimeout},
		NeverHeldDeleters: o.neverHeldDeleters,
	}}
	if err := app.SetupWebhooks(ctx, mgr, so, shared); err != nil {
		return fmt.Errorf("setting up holdfast: %w", err)
	}
	if !o.leaderElect {
		if err := app.SetupControllers(mgr, so, shared); err != nil {
			return fmt.Errorf("setting up holdfast's controllers: %w", err)
		}
	} else if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return runControllers(ctx, cfg, mgr, o, so, shared, log)
	})); err != nil {
		return err
	}
	log.Info("Serving", "webhookPort", o.webhookPort, "metrics", o.metricsAddr, "probes", o.probeAddr, "namespace", o.namespace)
	return mgr.Start(ctx)
}

// runControllers runs the controllers (policy status, PDB generator, ledger sweeper) in a
// manager of their own that campaigns for the lease over the webhook manager's cache. When
// it loses the lease it stops and campaigns again; the webhooks keep serving meanwhile.
func runControllers(ctx context.Context, cfg *rest.Config, owner manager.Manager, o *options, so app.Options, shared *app.Shared, log logr.Logger) error {
	for {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme: owner.GetScheme(),
			NewCache: func(*rest.Config, cache.Options) (cache.Cache, error) {
				return app.SharedCache(owner.GetCache()), nil
			},
			Metrics:                       metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress:        "0",
			LeaderElection:                true,
			LeaderElectionID:              o.leaderElectionID,
			LeaderElectionNamespace:       o.namespace,
			LeaderElectionReleaseOnCancel: true,
			LeaseDuration:                 &o.leaseDuration,
			RenewDeadline:                 &o.renewDeadline,
			RetryPeriod:                   &o.retryPeriod,
			GracefulShutdownTimeout:       &o.gracefulShutdownPeriod,
			// Each campaign registers the controllers anew under the same names.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			return fmt.Errorf("creating the controllers' manager: %w", err)
		}
		if err := app.SetupControllers(mgr, so, shared); err != nil {
			return fmt.Errorf("setting up holdfast's controllers: %w", err)
		}
		err = mgr.Start(ctx)
		if ctx.Err() != nil {
			return nil
		}
		log.Error(err, "The controllers stopped; the webhooks keep serving while this replica campaigns for the lease again")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.retryPeriod):
		}
	}
}

// shutdownContext is cancelled delay after the first SIGTERM or SIGINT; meanwhile draining
// is true, so that readiness fails and the endpoints that send webhook requests here drop
// this replica while it still answers them. A second signal exits at once.
func shutdownContext(delay time.Duration, log logr.Logger) (context.Context, *atomic.Bool) {
	ctx, cancel := context.WithCancel(context.Background())
	draining := &atomic.Bool{}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	go func() {
		sig := <-ch
		draining.Store(true)
		log.Info("Shutting down: readiness fails now, serving stops after the delay", "signal", sig.String(), "delay", delay)
		select {
		case <-time.After(delay):
		case <-ch:
			os.Exit(1)
		}
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx, draining
}

func newZapLogger(o *options) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	if o.logFormat == "console" {
		cfg = zap.NewDevelopmentConfig()
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	}
	cfg.Level = zap.NewAtomicLevelAt(o.zapLevel())
	cfg.Sampling = nil
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return cfg.Build()
}

// restConfig is the replica's client configuration. It asks the API server for
// uncompressed responses: holdfast watches every workload of the cluster, and the API
// server would otherwise gzip each event of those watches for a client beside it in the
// cluster's network (as kube's own loopback clients, it is CPU spent on both sides for
// bandwidth not worth saving; measured in make bench's comparison).
func restConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = ctrl.GetConfig()
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil && cfg.QPS == 0 {
		// As ctrl.GetConfig does: no client-side rate limiter, the API server's priority and
		// fairness applies; otherwise client-go's default of 5 requests a second would hold
		// the clients of a replica started with --kubeconfig alone.
		cfg.QPS = -1
	}
	if err != nil {
		return nil, err
	}
	cfg.DisableCompression = true
	return cfg, nil
}

// +kubebuilder:rbac:groups="",namespace=holdfast-system,resources=secrets,verbs=get;list;watch;create;update;patch
// The rotator watches webhook configurations cluster-wide (list and watch cannot be limited
// by name) and updates only holdfast's own, named as config/ names it; the chart writes its
// release's name there (hack/chartgen).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=holdfast,verbs=get;update

// addCertRotator makes holdfast issue and rotate its own serving certificate (a CA and a
// leaf for the webhook Service, kept in a Secret the pod mounts at --cert-dir) and inject
// the CA into its webhook configuration. Readiness waits for both.
func addCertRotator(mgr ctrl.Manager, o *options) error {
	ready := make(chan struct{})
	svc := o.webhookService + "." + o.namespace + ".svc"
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:            types.NamespacedName{Namespace: o.namespace, Name: o.webhookSecret},
		CertDir:              o.certDir,
		CAName:               "holdfast-ca",
		CAOrganization:       "holdfast",
		DNSName:              svc,
		ExtraDNSNames:        []string{svc + ".cluster.local"},
		IsReady:              ready,
		Webhooks:             []rotator.WebhookInfo{{Name: o.webhookConfigName, Type: rotator.Validating}},
		FieldOwner:           "holdfast",
		EnableReadinessCheck: true,
	})
	if err != nil {
		return fmt.Errorf("setting up certificate rotation: %w", err)
	}
	return mgr.AddReadyzCheck("certificates", func(*http.Request) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("the serving certificate is not yet mounted or its CA not yet injected")
		}
	})
}
