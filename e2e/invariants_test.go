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
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// waitJournal waits until holdfast's leader's journal of the workload is as want says.
func waitJournal(ctx context.Context, t *testing.T, c client.Client, kind v1alpha1.WorkloadKind, ns, name string, want func(*journal.Journal) bool) {
	t.Helper()
	key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(kind, ns, name)}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		j, err := journal.Decode(cm)
		return err == nil && want(j), nil
	}); err != nil {
		t.Fatalf("the journal of %s %s/%s: %v (log: %s)", kind, ns, name, err, holdfastLog)
	}
	time.Sleep(time.Second) // every replica's cache has it
}

func finished(j *journal.Journal) bool { return j.Current().Finished != nil }

// nodePool puts three of the test bed's nodes in a pool (labelled pool: "true", taken
// out again when the test ends) and returns join, which adds the fourth: a node joining
// the pool, for DaemonSets confined to it by a node selector.
func nodePool(ctx context.Context, t *testing.T, c client.Client, pool string) (join func()) {
	t.Helper()
	nodes := poolNodes(ctx, t, c, pool, 4)
	for _, n := range nodes[:3] {
		labelPool(t, c, n, pool, true)
	}
	return func() { labelPool(t, c, nodes[3], pool, true) }
}

// poolNodes returns n of the test bed's nodes, each taken out of the pool again when the
// test ends.
func poolNodes(ctx context.Context, t *testing.T, c client.Client, pool string, n int) []*corev1.Node {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil || len(nodes.Items) < n {
		t.Fatalf("want at least %d nodes: %d, %v", n, len(nodes.Items), err)
	}
	var out []*corev1.Node
	for i := range n {
		node := &nodes.Items[i]
		t.Cleanup(func() { labelPool(t, c, node, pool, false) })
		out = append(out, node)
	}
	return out
}

// labelPool puts the node in the pool (labelled pool: "true") or takes it out.
func labelPool(t *testing.T, c client.Client, n *corev1.Node, pool string, on bool) {
	value := "null"
	if on {
		value = `"true"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, pool, value))
	if err := c.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Error(err)
	}
}

// TestDaemonSetWithAnUnavailablePodTakesAChange is scenario 10: a fully updated DaemonSet
// one of whose pods is not available (here: its pod on a node that just joined, inside
// minReadySeconds) is not "rolling out", so a change, its fix included, passes. Its
// status says otherwise; the journal's sticky "finished" decides.
func TestDaemonSetWithAnUnavailablePodTakesAChange(t *testing.T) {
	const pool = "holdfast.dev/e2e-scenario-10"
	f := features.New("scenario 10").
		Assess("a change passes while a new node's agent is not yet available", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "ds-notready")
			settlePolicyIn(ctx, t, c, ns)
			join := nodePool(ctx, t, c, pool)
			tmpl := utiltesting.MakeDeployment(ns, "agent").Obj().Spec.Template
			tmpl.Spec.NodeSelector = map[string]string{pool: "true"}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl, MinReadySeconds: 15}}
			if err := c.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			dsStatus(ctx, t, c, ds, func(s *appsv1.DaemonSetStatus) bool { return s.DesiredNumberScheduled == 3 && s.NumberAvailable == 3 })
			waitJournal(ctx, t, c, v1alpha1.KindDaemonSet, ns, ds.Name, finished)

			join() // a node joins the pool
			dsStatus(ctx, t, c, ds, func(s *appsv1.DaemonSetStatus) bool { return s.DesiredNumberScheduled == 4 && s.NumberAvailable == 3 })
			w, err := workload.From(ds)
			if err != nil || !w.Rollout.InProgress {
				t.Fatalf("the status should read as in progress, the trap of a status gate: %+v (%v)", ds.Status, err)
			}
			// The DaemonSet controller may write its status between the read and the update:
			// a conflict is the API server's, not holdfast's answer, and is retried on a
			// fresh read (inside minReadySeconds, the joined node's agent is still unavailable).
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
					return err
				}
				ds.Spec.Template.Spec.Containers[0].Image = "registry.example/main:fixed"
				return c.Update(ctx, ds)
			})
			fmt.Printf("SCENARIO daemonset-unavailable-pod changeAdmitted=%t\n", err == nil)
			if err != nil {
				t.Fatalf("a change to a fully updated DaemonSet with one unavailable pod was refused: %v", err)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestOrphaningDeleteAndRecreate is scenario 9: a Deployment deleted with
// --cascade=orphan while a rollout is unfinished, then re-created with a new template,
// would adopt both ReplicaSets and start a third revision; holdfast refuses it, and
// admits the re-create with the template it had.
func TestOrphaningDeleteAndRecreate(t *testing.T) {
	f := features.New("scenario 9").
		Assess("a re-create adopting an unfinished rollout keeps its template", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "orphan")
			settlePolicyIn(ctx, t, c, ns)
			d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
				return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3, err
			}); err != nil {
				t.Fatalf("GEN A never became available: %v", err)
			}
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, d.Name, finished)

			// B's pods stay unavailable for a minute: its rollout is unfinished.
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
					return err
				}
				d.Spec.MinReadySeconds = 60
				d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:B"
				return c.Update(ctx, d)
			}); err != nil {
				t.Fatalf("A finished, B must pass: %v", err)
			}
			waitJournal(ctx, t, c, v1alpha1.KindDeployment, ns, d.Name, func(j *journal.Journal) bool {
				return len(j.Revisions) == 2 && j.Current().Finished == nil // B recorded, rolling out
			})
			deleteOrphaning(ctx, t, c, d)

			recreate := func(image string) error {
				n := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
				n.Spec.MinReadySeconds = 60
				n.Spec.Template.Spec.Containers[0].Image = image
				return c.Create(ctx, n)
			}
			// Once the leader has recorded the delete (before, any template but the last one
			// recorded is refused as well), the third template is refused by settle.
			key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDeployment, ns, "kas")}
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, cm); err != nil {
					return false, err
				}
				j, err := journal.Decode(cm)
				return err == nil && j.Deleted != nil, nil
			}); err != nil {
				t.Fatalf("the leader never recorded the delete: %v", err)
			}
			time.Sleep(time.Second) // every replica's cache has it
			if err := recreate("registry.example/main:C"); !apierrors.IsForbidden(err) {
				t.Fatalf("re-creating with a third template while B rolls out: %v, want holdfast's refusal", err)
			}
			if err := recreate("registry.example/main:B"); err != nil {
				t.Fatalf("re-creating with the template it had: %v", err)
			}
			var sets appsv1.ReplicaSetList
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				cur := &appsv1.Deployment{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
					return false, err
				}
				if err := c.List(ctx, &sets, client.InNamespace(ns)); err != nil {
					return false, err
				}
				adopted := 0
				for _, rs := range sets.Items {
					if workload.ControlledBy(rs.OwnerReferences, cur.UID) {
						adopted++
					}
				}
				return adopted == 2, nil
			}); err != nil {
				t.Fatalf("the re-created Deployment should adopt A's and B's ReplicaSets: %d ReplicaSets, %v", len(sets.Items), err)
			}
			fmt.Printf("SCENARIO orphan-recreate thirdTemplateRefused=true replicaSets=%d\n", len(sets.Items))
			if len(sets.Items) != 2 {
				t.Errorf("%d ReplicaSets, want A's and B's only", len(sets.Items))
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// TestRequesterBudgetsAndMaxHold: cluster-autoscaler's identity is held at 0 (403 for
// every pod) while a human's drain takes the pods one at a time; its evictions, held past
// maxHold while each replacement settles, raise Warning Events on the pod and its node,
// and are admitted all the same once the budget allows.
func TestRequesterBudgetsAndMaxHold(t *testing.T) {
	f := features.New("requesters and maxHold").
		Assess("the autoscaler is refused, a human drains, holds past maxHold are warned about", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "requesters")
			const autoscaler = "system:serviceaccount:kube-system:cluster-autoscaler"
			namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
				s.MinReadySeconds = 8
				s.MaxHold = &metav1.Duration{Duration: 3 * time.Second}
				s.Requesters = []v1alpha1.Requester{{ServiceAccounts: []string{"kube-system/cluster-autoscaler"}, MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			})
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evict"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}}}}
			binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evict"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "evict"},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: autoscaler},
					{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}
			for _, o := range []client.Object{role, binding} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			d := utiltesting.MakeDeployment(ns, "agent").Replicas(3).Obj()
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			pods := waitReadyPods(ctx, t, c, ns, "agent", 3)
			time.Sleep(9 * time.Second) // Ready for minReadySeconds: available
			as := func(user string) *kubernetes.Clientset {
				rc := rest.CopyConfig(cfg.Client().RESTConfig())
				rc.Impersonate = rest.ImpersonationConfig{UserName: user}
				return kubernetes.NewForConfigOrDie(rc)
			}
			evict := func(cs *kubernetes.Clientset, pod string) error {
				ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
				return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("eviction").
					Body(ev).MaxRetries(0).Do(ctx).Error()
			}

			autoscalerAllowed := 0
			for _, p := range pods {
				switch err := evict(as(autoscaler), p.Name); {
				case err == nil:
					autoscalerAllowed++
				case !apierrors.IsForbidden(err):
					t.Errorf("the autoscaler evicting %s: %v, want holdfast's 403", p.Name, err)
				}
			}

			// The human's drain: one pod at a time, retrying 429s every second as kubectl drain does.
			alice := as("alice")
			drained := 0
			for _, p := range pods {
				deadline := time.Now().Add(90 * time.Second)
				for {
					err := evict(alice, p.Name)
					if err == nil || apierrors.IsNotFound(err) {
						drained++
						break
					}
					if !apierrors.IsTooManyRequests(err) || time.Now().After(deadline) {
						t.Errorf("the human's eviction of %s: %v", p.Name, err)
						break
					}
					time.Sleep(time.Second)
				}
			}
			fmt.Printf("SCENARIO requester-budgets autoscalerAllowed=%d humanDrained=%d/%d\n", autoscalerAllowed, drained, len(pods))
			if autoscalerAllowed != 0 || drained != len(pods) {
				t.Errorf("autoscaler allowed %d (want 0), human drained %d of %d", autoscalerAllowed, drained, len(pods))
			}

			// Each held eviction waited for the last replacement to settle, longer than maxHold.
			onPods, onNodes := 0, 0
			if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				var list eventsv1.EventList
				if err := c.List(ctx, &list); err != nil {
					return false, err
				}
				onPods, onNodes = 0, 0
				for _, e := range list.Items {
					if e.Reason != "EvictionHeldTooLong" {
						continue
					}
					switch {
					case e.Regarding.Kind == "Pod" && e.Regarding.Namespace == ns:
						onPods++
					case e.Regarding.Kind == "Node" && strings.Contains(e.Note, ns+"/"):
						onNodes++
					}
				}
				return onPods > 0 && onNodes > 0, nil
			}); err != nil {
				t.Errorf("Warning Events for evictions held past maxHold: %d on pods, %d on nodes: %v", onPods, onNodes, err)
			}
			fmt.Printf("SCENARIO held-too-long maxHold=3s warningsOnPods=%d warningsOnNodes=%d\n", onPods, onNodes)
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
