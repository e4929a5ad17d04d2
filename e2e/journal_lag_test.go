//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// readyAt is when the pod became Ready; zero while it is not.
func readyAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// TestDaemonSetStallWhileNodesJoin: a DaemonSet's rollout from A to B is stuck (B's pod on
// the first node it replaces never gets Ready, so kube, within maxUnavailable 1, replaces
// no other) while new nodes keep joining its pool, each getting a pod of B that gets
// Ready. Those pods are the cluster growing, not the rollout progressing: once stallAfter
// (20 s) has passed since B became current, the fix (C) is admitted, although a node's
// pod got Ready moments before; before that, it is refused. kwok's readiness of B's pods
// is delayed by an hour; the test sets the joined nodes' pods Ready itself.
func TestDaemonSetStallWhileNodesJoin(t *testing.T) {
	const pool = "holdfast.dev/e2e-stall-join"
	const stallAfter = 20 * time.Second
	f := features.New("DaemonSet stall while nodes join").
		Assess("the fix of a stuck rollout passes while the cluster grows", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "ds-stall-join")
			policyIn(ctx, t, c, ns, nil, func(r *v1alpha1.RolloutRules) {
				r.Settle = &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: stallAfter}}
			})
			nodePool(ctx, t, c, pool)
			tmpl := utiltesting.MakeDeployment(ns, "agent").Obj().Spec.Template
			tmpl.Spec.NodeSelector = map[string]string{pool: "true"}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			// podOf waits for a pod of image (on node, when not empty) that kwok has started
			// (it has an IP), Ready when ready says so, and returns it.
			podOf := func(image, node string, ready bool) *corev1.Pod {
				t.Helper()
				var found *corev1.Pod
				if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
					var list corev1.PodList
					if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
						return false, err
					}
					n := 0
					for i := range list.Items {
						p := &list.Items[i]
						if p.Spec.Containers[0].Image == image && (node == "" || p.Spec.NodeName == node) && p.Status.PodIP != "" &&
							!readyAt(p).IsZero() == ready && p.DeletionTimestamp == nil {
							found = p
							n++
						}
					}
					return found != nil && (node != "" || !ready || n == 3), nil
				}); err != nil {
					t.Fatalf("no started pod of %s on %q (Ready %t)", image, node, ready)
				}
				return found
			}
			edit := func(image string, opts ...client.UpdateOption) error {
				return retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur := &appsv1.DaemonSet{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(ds), cur); err != nil {
						return err
					}
					cur.Spec.Template.Spec.Containers[0].Image = image
					if image != tmpl.Spec.Containers[0].Image {
						// kwok makes pods of B and C Ready only in an hour.
						cur.Spec.Template.Annotations = map[string]string{
							"pod-ready.stage.kwok.x-k8s.io/delay": "1h", "pod-ready.stage.kwok.x-k8s.io/jitter-delay": "1h"}
					}
					return c.Update(ctx, cur, opts...)
				})
			}
			// ready sets a pod Ready, as its kubelet would.
			ready := func(p *corev1.Pod) time.Time {
				t.Helper()
				now := metav1.Now()
				if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
						return err
					}
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = nil
					for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
						p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: ct, Status: corev1.ConditionTrue, LastTransitionTime: now})
					}
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
						Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
					return c.Status().Update(ctx, p)
				}); err != nil {
					t.Fatalf("setting %s Ready: %v", p.Name, err)
				}
				return now.Time
			}
			a, b, fix := tmpl.Spec.Containers[0].Image, "registry.example/agent:b", "registry.example/agent:c"
			podOf(a, "", true)
			waitJournal(ctx, t, c, v1alpha1.KindDaemonSet, ns, ds.Name, finished)

			if err := edit(b); err != nil {
				t.Fatalf("the rollout to B of a finished DaemonSet was refused: %v", err)
			}
			var began time.Time
			waitJournal(ctx, t, c, v1alpha1.KindDaemonSet, ns, ds.Name, func(j *journal.Journal) bool {
				began = j.Current().Since
				return len(j.Revisions) >= 2
			})
			if err := edit(fix, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "settle") {
				cm := &corev1.ConfigMap{}
				_ = c.Get(ctx, client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDaemonSet, ns, ds.Name)}, cm)
				cur := &appsv1.DaemonSet{}
				_ = c.Get(ctx, client.ObjectKeyFromObject(ds), cur)
				t.Fatalf("the fix right after B became current: %v; want refused by settle (journal %v, status %+v, generation %d)", err, cm.Data, cur.Status, cur.Generation)
			}
			// kube replaces the first node's A (once it has terminated) by a B that never
			// gets Ready, and no other.
			podOf(b, "", false)

			// Nodes join the pool every 7 s; each gets a pod of B, which gets Ready.
			var last time.Time
			for i := range 3 {
				time.Sleep(time.Until(began.Add(time.Duration(2+7*i) * time.Second)))
				name := fmt.Sprintf("%s-%d", ns, i)
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
					Labels: map[string]string{pool: "true", "type": "kwok", corev1.LabelHostname: name}}}
				if err := c.Create(ctx, node); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
				last = ready(podOf(b, name, false))
			}
			time.Sleep(time.Until(began.Add(stallAfter + 3*time.Second)))
			err := edit(fix)
			sinceJoin := time.Since(last)
			fmt.Printf("SCENARIO daemonset-stall-nodes-joining joined=3 sinceRolloutBegan=%s sinceJoinReady=%s fixAdmitted=%t\n",
				time.Since(began).Round(time.Second), sinceJoin.Round(time.Second), err == nil)
			if sinceJoin >= stallAfter {
				t.Fatalf("the last node's pod got Ready %s before the fix, not within stallAfter: the test proves nothing", sinceJoin)
			}
			if err != nil {
				t.Fatalf("the fix of a rollout without progress for %s (stallAfter %s) was refused because nodes joined: %v",
					time.Since(began).Round(time.Second), stallAfter, err)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// holdJournal stops holdfast's leader from writing the workload's journal, as a leader
// that lags does: a ValidatingAdmissionPolicy refuses every write of it. The returned
// release lifts it.
func holdJournal(ctx context.Context, t *testing.T, c client.Client, kind v1alpha1.WorkloadKind, ns, name string) (release func()) {
	t.Helper()
	cmName := journal.Name(kind, ns, name)
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hold-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("request.namespace != %q || request.name != %q", holdfastNamespace, cmName),
				Message:    "the test holds this revision journal"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	for _, o := range []client.Object{vap, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	release = func() {
		_ = c.Delete(context.Background(), binding)
		_ = c.Delete(context.Background(), vap)
	}
	t.Cleanup(release)
	// In force once a write of the journal is refused.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: holdfastNamespace, Name: cmName}, cm); err != nil {
			return false, err
		}
		return c.Update(ctx, cm, client.DryRunAll) != nil, nil
	}); err != nil {
		t.Fatalf("the journal's writes are not held: %v", err)
	}
	return release
}

// TestRevertWindowWithTheJournalBehind: under revertWindow alone (15 s), a Deployment goes
// from B to A (A left longer ago than the window: not a return), back to B (the one return
// the window allows, cancelling A's rollout) and again to A, while holdfast's leader
// cannot write the journal, which still shows B as before the first flip. kube renumbered
// the ReplicaSets (A 3, B 4): the third flip is a second return within the window and is
// refused; so it is once the leader has caught up, and a new template passes.
func TestRevertWindowWithTheJournalBehind(t *testing.T) {
	const window = 15 * time.Second
	f := features.New("revertWindow with the journal behind").
		Assess("the second return within the window is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "flip-lag")
			policyIn(ctx, t, c, ns, nil, func(r *v1alpha1.RolloutRules) { r.RevertWindow = &metav1.Duration{Duration: window} })
			dep := utiltesting.MakeDeployment(ns, "web").Replicas(3).Obj()
			a, b := dep.Spec.Template.Spec.Containers[0].Image, "registry.example/main:b"
			if err := c.Create(ctx, dep); err != nil {
				t.Fatal(err)
			}
			edit := func(image string) error {
				return retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur := &appsv1.Deployment{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(dep), cur); err != nil {
						return err
					}
					cur.Spec.Template.Spec.Containers[0].Image = image
					return c.Update(ctx, cur)
				})
			}
			// revisions waits until kube numbered the ReplicaSets of A and B as want says.
			revisions := func(want map[string]int64) {
				t.Helper()
				got := map[string]int64{}
				if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
					var sets appsv1.ReplicaSetList
					if err := c.List(ctx, &sets, client.InNamespace(ns)); err != nil {
						return false, err
					}
					for _, rs := range sets.Items {
						got[rs.Spec.Template.Spec.Containers[0].Image], _ = strconv.ParseInt(rs.Annotations["deployment.kubernetes.io/revision"], 10, 64)
					}
					return got[a] == want[a] && got[b] == want[b], nil
				}); err != nil {
					t.Fatalf("ReplicaSets numbered %v, want %v", got, want)
				}
				time.Sleep(time.Second) // every replica's cache has them
			}
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, dep.Name, finished)
			if err := edit(b); err != nil {
				t.Fatal(err)
			}
			var leftA time.Time
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, dep.Name, func(j *journal.Journal) bool {
				if len(j.Revisions) < 2 || !finished(j) {
					return false
				}
				leftA = *j.Revisions[len(j.Revisions)-2].Until
				return true
			})
			time.Sleep(time.Until(leftA.Add(window + 2*time.Second))) // A is no longer a return

			release := holdJournal(ctx, t, c, v1alpha1.KindDeployment, ns, dep.Name)
			if err := edit(a); err != nil {
				t.Fatalf("B -> A, A left more than the window ago: %v", err)
			}
			if err := edit(b); err != nil {
				t.Fatalf("A -> B, the first return, cancelling A's rollout: %v", err)
			}
			revisions(map[string]int64{a: 3, b: 4})
			err := edit(a)
			fmt.Printf("SCENARIO revert-window-journal-behind flips=2 thirdRefused=%t\n", err != nil)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "revertWindow") {
				t.Fatalf("B -> A, a second return within %s while the journal lags two flips: %v; want refused by revertWindow", window, err)
			}

			// The leader catches up and records both flips; the flip stays refused, and a new
			// template passes.
			release()
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, dep.Name, func(j *journal.Journal) bool { return len(j.Revisions) >= 4 })
			if err := edit(a); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "revertWindow") {
				t.Fatalf("B -> A once the journal caught up: %v; want refused by revertWindow", err)
			}
			if err := edit("registry.example/main:c"); err != nil {
				t.Fatalf("a new template after the refused flip: %v", err)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
