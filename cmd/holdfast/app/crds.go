package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/validation"
)

// ReasonCRDsOutdated is the reason of the Warning Event on an installed CRD that lacks
// fields this holdfast knows, and of its log line.
const ReasonCRDsOutdated = "CRDsOutdated"

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=rolloutpolicies.holdfast.dev;disruptionpolicies.holdfast.dev,verbs=get

// CRDCheck compares the installed CRDs with the ones this build embeds
// (validation.CRDs), once, when the process starts: the API server prunes the fields an
// older schema lacks from every policy it stores and returns, without an error, so a
// holdfast upgraded without its CRDs would silently ignore what those fields say. What is
// missing is reported (CRDsOutdated: an error log line naming the fields, the Outdated
// gauge at 1, a Warning Event on each outdated CRD); holdfast serves on regardless, with
// what the installed schema lets it read.
type CRDCheck struct {
	// Reader reads CustomResourceDefinitions (NewCRDReader).
	Reader client.Reader
	// Events, when set, records the Warning Events.
	Events   events.EventRecorder
	Outdated prometheus.Gauge
	Log      logr.Logger
	// Want are the CRDs to compare with; nil means validation.CRDs.
	Want []*apiextensionsv1.CustomResourceDefinition
}

// NewCRDReader is a client that reads CRDs, apart from the manager's scheme and cache:
// holdfast reads two CRDs by name, once.
func NewCRDReader(cfg *rest.Config) (client.Reader, error) {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// NewCRDsOutdated is the gauge holdfast_crds_outdated, registered with reg.
func NewCRDsOutdated(reg prometheus.Registerer) (prometheus.Gauge, error) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "holdfast_crds_outdated",
		Help: "1 when an installed CRD lacks fields this holdfast knows, which the API server prunes from every policy (checked at start-up); 0 otherwise."})
	if err := reg.Register(g); err != nil {
		return nil, err
	}
	return g, nil
}

// Start runs the check once; an API server that cannot be read is retried for a minute.
// It never returns an error: an outdated or unreadable CRD does not stop holdfast.
func (c *CRDCheck) Start(ctx context.Context) error {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 30 * time.Second}
	var last error
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, last = c.Check(ctx)
		return last == nil, nil
	})
	if last != nil {
		c.Log.Error(last, "Could not compare the installed CRDs with this holdfast's; holdfast_crds_outdated stays 0")
	}
	return nil
}

// NeedLeaderElection is false: every replica reports its own view.
func (c *CRDCheck) NeedLeaderElection() bool { return false }

// Check compares the installed CRDs with Want, reports what is missing and returns it by
// CRD name (none: every field is served). A CRD that is not installed lacks everything.
func (c *CRDCheck) Check(ctx context.Context) (map[string][]string, error) {
	want := c.Want
	if want == nil {
		var err error
		if want, err = validation.CRDs(); err != nil {
			return nil, err
		}
	}
	missing := map[string][]string{}
	for _, w := range want {
		installed := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Reader.Get(ctx, client.ObjectKey{Name: w.Name}, installed)
		if apierrors.IsNotFound(err) {
			missing[w.Name] = []string{"the CRD"}
			c.Log.Error(nil, "A CRD holdfast reads is not installed", "reason", ReasonCRDsOutdated, "crd", w.Name)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the CRD %s: %w", w.Name, err)
		}
		fields := validation.MissingFields(installed, w)
		if len(fields) == 0 {
			continue
		}
		missing[w.Name] = fields
		c.Log.Error(nil, "The installed CRD lacks fields this holdfast reads: the API server drops them from every policy. Apply this release's CRDs (helm upgrade does, with crds.install)",
			"reason", ReasonCRDsOutdated, "crd", w.Name, "missing", fields)
		if c.Events != nil {
			// The reference needs the kind, which the manager's scheme does not know.
			installed.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			c.Events.Eventf(installed, nil, corev1.EventTypeWarning, ReasonCRDsOutdated, "Check",
				"holdfast reads fields this CRD lacks, which the API server drops from every policy: %s; apply this release's CRDs", strings.Join(fields, ", "))
		}
	}
	if len(missing) > 0 {
		c.Outdated.Set(1)
	} else {
		c.Outdated.Set(0)
	}
	return missing, nil
}
