//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestDeploymentOnFakeNodes checks the test bed itself: the real controller-manager
// creates a ReplicaSet for a Deployment, the real scheduler places its pods on kwok's
// nodes, and kwok's stages make them Running and Ready.
func TestDeploymentOnFakeNodes(t *testing.T) {
	f := features.New("deployment on fake nodes").
		Assess("the ReplicaSet's pods become Ready on fake nodes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName("bed", 10)}}
			if err := c.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			d := utiltesting.MakeDeployment(ns.Name, "web").Replicas(3).Obj()
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			var ready []corev1.Pod
			var rs appsv1.ReplicaSet
			err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				var sets appsv1.ReplicaSetList
				if err := c.List(ctx, &sets, client.InNamespace(ns.Name)); err != nil {
					return false, err
				}
				owned := ownedBy(sets.Items, d)
				if len(owned) != 1 {
					return false, nil
				}
				rs = owned[0]
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.InNamespace(ns.Name), client.MatchingLabels{"app": "web"}); err != nil {
					return false, err
				}
				ready = ready[:0]
				for _, p := range pods.Items {
					if workload.PodServing(&p) && p.Spec.NodeName != "" && workload.ControlledBy(p.OwnerReferences, rs.UID) {
						ready = append(ready, p)
					}
				}
				return len(ready) == 3, nil
			})
			if err != nil {
				t.Fatalf("want 3 Ready pods of one ReplicaSet, got %d: %v", len(ready), err)
			}
			nodes := map[string]bool{}
			for _, p := range ready {
				var n corev1.Node
				if err := c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err != nil {
					t.Fatalf("pod %s on node %q: %v", p.Name, p.Spec.NodeName, err)
				}
				if n.Annotations["kwok.x-k8s.io/node"] != "fake" {
					t.Errorf("pod %s runs on %s, which is not a kwok node", p.Name, n.Name)
				}
				nodes[n.Name] = true
			}
			t.Logf("ReplicaSet %s: 3 Ready pods on %d fake nodes", rs.Name, len(nodes))
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestHoldfastGuardsThroughTheAPIServer checks that the kwok cluster's API server calls
// the locally running holdfast by URL and returns its denial to the client.
func TestHoldfastGuardsThroughTheAPIServer(t *testing.T) {
	f := features.New("holdfast webhook by URL").
		Assess("a RolloutPolicy denies a mismatched --server-count", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName("guard", 12)}}
			if err := c.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			p := utiltesting.MakeRolloutPolicy(ns.Name).ArgMatchesReplicas("konnectivity-server", "--server-count").
				NamespaceSelector(map[string]string{corev1.LabelMetadataName: ns.Name}).Obj()
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			bad := utiltesting.MakeDeployment(ns.Name, "kube-apiserver").Replicas(3).
				Container("konnectivity-server", "--server-count=1").Obj()
			// holdfast's cache sees the new policy within moments; until then the create passes.
			var err error
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				err = c.Create(ctx, bad.DeepCopy(), client.DryRunAll)
				return err != nil, nil
			})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `.rollout.holdfast.dev" denied`) {
				t.Fatalf("got %v, want holdfast's 403 (holdfast log: %s)", err, holdfastLog)
			}
			good := bad.DeepCopy()
			good.Spec.Template.Spec.Containers[1].Args = []string{fmt.Sprintf("--server-count=%d", *good.Spec.Replicas)}
			if err := c.Create(ctx, good); err != nil {
				t.Fatalf("matching --server-count must be admitted: %v", err)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

func ownedBy(sets []appsv1.ReplicaSet, d *appsv1.Deployment) []appsv1.ReplicaSet {
	var out []appsv1.ReplicaSet
	for _, rs := range sets {
		if workload.ControlledBy(rs.OwnerReferences, d.UID) {
			out = append(out, rs)
		}
	}
	return out
}
