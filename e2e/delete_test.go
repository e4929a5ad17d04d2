//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// TestKubesDeletesNeverHeld: under a DisruptionPolicy with guardDeletes and an hour's
// cooldown, after an eviction a person's delete of a Ready agent is held (429), and so is
// kubectl drain --disable-eviction (it stops, told to evict instead), while the
// deletes the controller-manager makes on its service-account credentials are not: a
// scale-down (the ReplicaSet controller) completes, and so does the deletion of the
// namespace (the namespace controller and the garbage collector), each well inside the
// cooldown that would hold them.
func TestKubesDeletesNeverHeld(t *testing.T) {
	const agents = 4
	f := features.New("kube's deletes").
		Assess("a scale-down and a namespace deletion pass guarded deletes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, cs, ns := disruptionNamespace(ctx, t, cfg, "deletes", func(s *v1alpha1.DisruptionPolicySpec) {
				s.GuardDeletes = true
				s.Cooldown = &metav1.Duration{Duration: time.Hour}
			})
			pods := readyDeployment(ctx, t, c, ns, "agent", agents, nil)

			if err := evictOnce(ctx, cs, ns, pods[0].Name); err != nil {
				t.Fatalf("the first eviction: %v", err)
			}
			if err := cs.CoreV1().Pods(ns).Delete(ctx, pods[1].Name, metav1.DeleteOptions{}); !apierrors.IsTooManyRequests(err) {
				t.Fatalf("kubectl delete pod inside the cooldown: %v, want 429", err)
			}
			// kubectl drain --disable-eviction of the node, limited to this namespace's pods
			// (the nodes are shared with other tests): it stops at the held delete, and says
			// how to evict instead.
			h := &drain.Helper{Ctx: ctx, Client: cs, Force: true, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
				DisableEviction: true, Timeout: time.Minute, Out: io.Discard, ErrOut: io.Discard,
				AdditionalFilters: []drain.PodFilter{func(p corev1.Pod) drain.PodDeleteStatus {
					if p.Namespace != ns {
						return drain.MakePodDeleteStatusSkip()
					}
					return drain.MakePodDeleteStatusOkay()
				}}}
			if err := drain.RunNodeDrain(h, pods[1].Spec.NodeName); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "evict the pod instead") {
				t.Fatalf("kubectl drain --disable-eviction inside the cooldown: %v, want it stopped by a 429 that says to evict instead", err)
			}

			start := time.Now()
			if err := c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}},
				client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				var list corev1.PodList
				if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
					return false, err
				}
				live := 0
				for _, p := range list.Items {
					if p.DeletionTimestamp == nil {
						live++
					}
				}
				return live == 1, nil
			})
			if err != nil {
				t.Fatalf("the scale-down to 1 never deleted its pods: %v", err)
			}
			scaleDown := time.Since(start)

			start = time.Now()
			if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
			if err != nil {
				t.Fatalf("the namespace was never deleted: %v", err)
			}
			fmt.Printf("SCENARIO kube-deletes scaleDownSeconds=%.1f namespaceDeleteSeconds=%.1f cooldownSeconds=3600\n",
				scaleDown.Seconds(), time.Since(start).Seconds())
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
