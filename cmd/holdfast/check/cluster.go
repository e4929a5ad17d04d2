package check

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// Cluster is a cluster as check --cluster reads it: what the rollout webhook reads, read
// through the webhook's own readers (rollout.Handler.ReadState) from the API server
// instead of informer caches, read-only. Its revision journals are read once, when it is
// connected; the rest as each change is decided.
type Cluster struct {
	reader  client.Reader
	handler *rollout.Handler
}

// ledgerTimeout bounds the ledger reads of one change: a command line may wait longer
// than the webhook, which must answer within the API server's timeout.
const ledgerTimeout = 30 * time.Second

// ConnectCluster connects to the cluster of a kubeconfig's context, as kubectl chooses
// them: the file ("" : $KUBECONFIG or ~/.kube/config) and the context ("": its current
// one). holdfast runs in namespace.
func ConnectCluster(kubeconfig, context, namespace string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	return NewCluster(cfg, namespace)
}

// NewCluster connects to the cluster cfg reaches, where holdfast runs in namespace.
func NewCluster(cfg *rest.Config, namespace string) (*Cluster, error) {
	if namespace == "" {
		namespace = DefaultHoldfastNamespace
	}
	c, err := client.New(cfg, client.Options{Scheme: informer.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	return newCluster(c, namespace)
}

// newCluster reads the cluster through c, a client of its API server.
func newCluster(c client.Client, namespace string) (*Cluster, error) {
	journals, err := journal.ReadStore(context.Background(), c, namespace)
	if err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	reader := informer.Direct(c)
	// The webhook decides on what its cache holds (app.CacheOptions' transforms): so does
	// check. The old object is read whole, as the API server sends it.
	cached := informer.CacheView(reader, app.CacheOptions(namespace, nil))
	return &Cluster{reader: reader, handler: &rollout.Handler{Reader: cached, Journals: journals, Matcher: policy.NewMatcher(),
		Ledgers: &budget.Ledgers{Live: c, Namespace: namespace, Timeout: ledgerTimeout}}}, nil
}

// old is the old object of a change to obj, as the API server would send it: what the
// cluster holds (status included) for a change given once, nil when it holds nothing; the
// object given, with the cluster's UID (which owns its revisions) when it has none.
func (c *Cluster) old(ctx context.Context, given, obj client.Object) (client.Object, error) {
	m, _ := workload.MetaOf(obj) // Evaluate reads only guarded kinds
	kind := m.Kind
	current, err := workload.New(kind)
	if err != nil {
		return nil, err
	}
	if err := c.reader.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		if apierrors.IsNotFound(err) {
			return given, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s from the cluster: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	switch {
	case given == nil:
		return current, nil
	case given.GetUID() == "":
		given = given.DeepCopyObject().(client.Object)
		given.SetUID(current.GetUID())
	}
	return given, nil
}

// namespaceLabels are the namespace's labels in the cluster; none when it does not exist
// (it is created with the workloads).
func (c *Cluster) namespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	labels, err := policy.NamespaceLabels(ctx, c.reader, namespace)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return labels, err
}
