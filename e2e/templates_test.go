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
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
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
			ds := onDeleteAgent(ctx, t, c, ns, pool)
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
				// A refusal that asks to retry (holdfast's cache has not seen every pod yet) is
				// not the answer under test.
				refused = edit("registry.example/agent:c", client.DryRunAll)
				return refused != nil && !strings.Contains(refused.Error(), "retry in a few seconds"), nil
			}); err != nil {
				t.Fatalf("an edit to a third template stays admitted with pods of A and B live")
			}
			// Then for real, retried the same way: the dry run and the edit may reach
			// different replicas, or the DaemonSet controller may have written a status
			// that holdfast's cache has not seen yet; both answer "retry", never admit.
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				refused = edit("registry.example/agent:c")
				return refused == nil || !strings.Contains(refused.Error(), "retry in a few seconds"), nil
			}); err != nil {
				t.Fatalf("the edit to a third template still asks to retry after 30s: %v", refused)
			}
			fmt.Printf("SCENARIO ondelete-third-template refused=%t\n", refused != nil)
			if !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), "settle") ||
				!strings.Contains(refused.Error(), "return to the template of revision") {
				t.Fatalf("the edit to a third template: %v, want 403 from settle naming the way back", refused)
			}
			waitPods(map[string]int{a: 3, "registry.example/agent:b": 1})
			// The way out: back to the template the other pods run, retried while holdfast's
			// journal has not caught up with the pods, as the refusal then says.
			var back error
			if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
				back = edit(a)
				return back == nil || !strings.Contains(back.Error(), "retry in a few seconds"), nil
			}); err != nil || back != nil {
				t.Fatalf("the return to the template with pods was refused: %v", back)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestEvictionThatStartsAStagedTemplate: an OnDelete DaemonSet's edit is staged; evicting
// one of its pods makes kube's DaemonSet controller create the replacement from the staged
// template, its first pod, with no request on the DaemonSet to judge. holdfast judges the
// eviction as that start: within minInterval of the last template it is deferred (429, so
// that drains retry), and so is a DELETE of the pod (the usual way to roll an OnDelete
// DaemonSet out), and a relabel out of its selector is refused (403: kube would release the
// pod and replace it); once the edit is rolled back, the same eviction passes. No
// DisruptionPolicy selects the namespace: the RolloutPolicy's own eviction and delete
// entries send both requests.
func TestEvictionThatStartsAStagedTemplate(t *testing.T) {
	const pool = "holdfast.dev/e2e-staged-eviction"
	f := features.New("eviction of an OnDelete DaemonSet's pod").
		Assess("the eviction that starts a staged template is judged as a start", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			cs := kubernetes.NewForConfigOrDie(cfg.Client().RESTConfig())
			ns := newNamespace(ctx, t, c, "ds-staged")
			policyIn(ctx, t, c, ns, nil, func(r *v1alpha1.RolloutRules) { r.MinInterval = &metav1.Duration{Duration: time.Hour} })
			nodePool(ctx, t, c, pool)
			ds := onDeleteAgent(ctx, t, c, ns, pool)
			a := ds.Spec.Template.Spec.Containers[0].Image
			// The pods need not be Ready: the rollout guard judges the replacement whatever
			// the pod's state, and the eviction guard lets a pod that is not Ready go at once.
			var pod corev1.Pod
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil || len(pods.Items) != 3 {
					return false, err
				}
				pod = pods.Items[0]
				return true, nil
			}); err != nil {
				t.Fatalf("the DaemonSet's three pods: %v", err)
			}
			edit := func(image string) {
				t.Helper()
				if err := updateStored(ctx, c, ds, func(cur *appsv1.DaemonSet) { cur.Spec.Template.Spec.Containers[0].Image = image }); err != nil {
					t.Fatalf("editing the OnDelete DaemonSet to %s: %v", image, err)
				}
			}
			evict := func(dryRun bool) error {
				ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}}
				if dryRun {
					ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
				}
				return cs.PolicyV1().Evictions(ns).Evict(ctx, ev)
			}
			// until probes with dry runs until holdfast's cache shows the edit.
			until := func(refused bool) {
				t.Helper()
				if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
					return (evict(true) != nil) == refused, nil
				}); err != nil {
					t.Fatalf("a dry-run eviction of %s never came to refused=%t: %v", pod.Name, refused, evict(true))
				}
			}

			// The edit is staged (OnDelete): every pod still runs A, and B has none.
			edit("registry.example/agent:b")
			until(true)
			err := evict(false)
			if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "first pod") && !strings.Contains(err.Error(), "no pod runs yet") ||
				!strings.Contains(err.Error(), "minInterval") {
				t.Fatalf("the eviction whose replacement is the staged template's first pod: %v, want 429 naming minInterval and the staged template", err)
			}
			// A DELETE of the pod, Ready or not, makes the same replacement.
			del := c.Delete(ctx, &pod)
			if !apierrors.IsTooManyRequests(del) || !strings.Contains(del.Error(), "no pod runs yet") || !strings.Contains(del.Error(), "minInterval") {
				t.Fatalf("the DELETE whose replacement is the staged template's first pod: %v, want 429 naming minInterval and the staged template", del)
			}
			// A relabel out of the selector: kube would release the pod and replace it.
			released := pod.DeepCopy()
			released.Labels = map[string]string{"holdfast.dev/e2e": "released"}
			rel := c.Patch(ctx, released, client.MergeFrom(&pod))
			if !apierrors.IsForbidden(rel) || !strings.Contains(rel.Error(), "releases it from its DaemonSet") || !strings.Contains(rel.Error(), "minInterval") {
				t.Fatalf("the relabel that releases the pod: %v, want 403 naming the release and minInterval", rel)
			}
			// The way out: the staged edit rolled back; the replacement runs A again.
			edit(a)
			until(false)
			rolledBack := evict(false)
			fmt.Printf("SCENARIO eviction-starts-staged refused=%t deleteRefused=%t relabelRefused=%t rolledBackAdmitted=%t\n", err != nil, del != nil, rel != nil, rolledBack == nil)
			if rolledBack != nil {
				t.Fatalf("the eviction after the staged edit was rolled back: %v", rolledBack)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// onDeleteAgent creates the OnDelete DaemonSet agent in the namespace, on the nodes of pool.
func onDeleteAgent(ctx context.Context, t *testing.T, c client.Client, ns, pool string) *appsv1.DaemonSet {
	t.Helper()
	tmpl := utiltesting.MakeDeployment(ns, "agent").Obj().Spec.Template
	tmpl.Spec.NodeSelector = map[string]string{pool: "true"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}
