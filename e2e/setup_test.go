//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// What a test of the rollout guard opens with: its own namespace, a RolloutPolicy over
// it, and the wait until holdfast enforces that policy.

func newNamespace(ctx context.Context, t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName(prefix, 16)}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// policyIn guards the namespace's workloads labelled labels (all of them when nil) with the
// rules rules sets, and the --server-count rule by which waitEnforced sees the policy in
// force. The policy is deleted when the test ends.
func policyIn(ctx context.Context, t *testing.T, c client.Client, ns string, labels map[string]string, rules func(*v1alpha1.RolloutRules)) *v1alpha1.RolloutPolicy {
	t.Helper()
	w := utiltesting.MakeRolloutPolicy(ns).ArgMatchesReplicas("konnectivity-server", "--server-count").
		NamespaceSelector(map[string]string{corev1.LabelMetadataName: ns})
	if labels != nil {
		w = w.Selector(labels)
	}
	p := w.Obj()
	rules(&p.Spec.Rules)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitEnforced(ctx, t, c, ns, labels)
	return p
}

// settlePolicyIn guards the namespace's workloads with settle (policyIn).
func settlePolicyIn(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	policyIn(ctx, t, c, ns, nil, func(r *v1alpha1.RolloutRules) { r.Settle = &v1alpha1.SettleRule{} })
}

// waitEnforced waits until holdfast's cache has the namespace's policy: a dry-run create
// of a Deployment labelled labels that breaks its --server-count rule is denied.
func waitEnforced(ctx context.Context, t *testing.T, c client.Client, ns string, labels map[string]string) {
	t.Helper()
	probe := utiltesting.MakeDeployment(ns, "probe").Replicas(2).Container("konnectivity-server", "--server-count=1").Obj()
	for k, v := range labels {
		probe.Labels[k] = v
	}
	deadline := time.Now().Add(20 * time.Second)
	for !apierrors.IsForbidden(c.Create(ctx, probe.DeepCopy(), client.DryRunAll)) {
		if time.Now().After(deadline) {
			t.Fatalf("holdfast never enforced the policy in %s (log: %s)", ns, holdfastLog)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// What a test of the disruption guard opens with: clients of the test bed, its own
// namespace under a DisruptionPolicy, a Deployment whose pods are Ready, and evictions
// whose every answer counts.

// disruptionNamespace is a new namespace (named from prefix) under a DisruptionPolicy of
// its own whose spec mut sets (namespacePolicy), with a client and a clientset.
func disruptionNamespace(ctx context.Context, t *testing.T, cfg *envconf.Config, prefix string, mut func(*v1alpha1.DisruptionPolicySpec)) (client.Client, *kubernetes.Clientset, string) {
	t.Helper()
	c := newClient(t, cfg)
	ns := newNamespace(ctx, t, c, prefix)
	namespacePolicy(ctx, t, c, ns, mut)
	return c, kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig()), ns
}

// readyDeployment creates the Deployment name of n replicas in the namespace, shaped by
// mut when not nil, and waits for its n Ready pods.
func readyDeployment(ctx context.Context, t *testing.T, c client.Client, ns, name string, n int, mut func(*appsv1.Deployment)) []corev1.Pod {
	t.Helper()
	d := utiltesting.MakeDeployment(ns, name).Replicas(int32(n)).Obj()
	if mut != nil {
		mut(d)
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	return waitReadyPods(ctx, t, c, ns, name, n)
}

// evictOnce asks once for the pod's eviction: client-go would retry a 429 that carries
// Retry-After silently, and each answer must count.
func evictOnce(ctx context.Context, cs kubernetes.Interface, ns, pod string) error {
	return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("eviction").
		Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}).MaxRetries(0).Do(ctx).Error()
}
