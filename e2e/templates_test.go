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

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestOnDeleteDaemonSetGetsNoThirdTemplate: an OnDelete DaemonSet's edit is staged, and
// kube's DaemonSet controller creates the pod of a node that joins from it. Once that
// pod runs, the DaemonSet's pods run two templates: a further edit would make a third
// with the next node, and holdfast refuses it, naming the ways out; a return to the
// template the other pods run passes.
func TestOnDeleteDaemonSetGetsNoThirdTemplate(t *testing.T) {
	const pool = "holdfast.dev/e2e-ondelete"
	f := features.New("OnDelete DaemonSet").
		Assess("an edit that would make a third template with pods is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "ds-ondelete")
			settlePolicyIn(ctx, t, c, ns)
			join := nodePool(ctx, t, c, pool)
			tmpl := utiltesting.MakeDeployment(ns, "agent").Obj().Spec.Template
			tmpl.Spec.NodeSelector = map[string]string{pool: "true"}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl,
					UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			images := func() map[string]int {
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				out := map[string]int{}
				for _, p := range pods.Items {
					out[p.Spec.Containers[0].Image]++
				}
				return out
			}
			waitPods := func(want map[string]int) {
				t.Helper()
				if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
					got := images()
					if len(got) != len(want) {
						return false, nil
					}
					for k, v := range want {
						if got[k] != v {
							return false, nil
						}
					}
					return true, nil
				}); err != nil {
					t.Fatalf("pods by image %v, want %v", images(), want)
				}
			}
			a := ds.Spec.Template.Spec.Containers[0].Image
			waitPods(map[string]int{a: 3})
			// The DaemonSet controller writes its status meanwhile: a conflict is read again.
			edit := func(image string, opts ...client.UpdateOption) error {
				return updateStored(ctx, c, ds, func(cur *appsv1.DaemonSet) { cur.Spec.Template.Spec.Containers[0].Image = image }, opts...)
			}

			// The first edit is staged: every pod still runs A.
			if err := edit("registry.example/agent:b"); err != nil {
				t.Fatalf("the first edit of an OnDelete DaemonSet was refused: %v", err)
			}
			waitPods(map[string]int{a: 3})
			// A node joins: kube creates its pod from B. Two templates have pods.
			join()
			waitPods(map[string]int{a: 3, "registry.example/agent:b": 1})

			// C would be the third, with the next node or the next replaced pod. Probed with
			// dry runs until holdfast's cache shows B's pod, then for real.
			var refused error
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				refused = edit("registry.example/agent:c", client.DryRunAll)
				return refused != nil, nil
			}); err != nil {
				t.Fatalf("an edit to a third template stays admitted with pods of A and B live")
			}
			refused = edit("registry.example/agent:c")
			fmt.Printf("SCENARIO ondelete-third-template refused=%t\n", refused != nil)
			if !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), "settle") ||
				!strings.Contains(refused.Error(), "return to the template of revision") {
				t.Fatalf("the edit to a third template: %v, want 403 from settle naming the way back", refused)
			}
			waitPods(map[string]int{a: 3, "registry.example/agent:b": 1})
			// The way out: back to the template the other pods run.
			if err := edit(a); err != nil {
				t.Fatalf("the return to the template with pods was refused: %v", err)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
