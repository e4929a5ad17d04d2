//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// alwaysFrozen is a Deny window that is always open: it opens daily and lasts a day.
var alwaysFrozen = []v1alpha1.Window{{Name: "freeze", Schedule: "0 0 * * *", Duration: metav1.Duration{Duration: 24 * time.Hour}, Action: v1alpha1.WindowDeny}}

// grantEdit lets the users update Deployments and evict pods in the namespace, so that
// what they are refused is holdfast's refusal, not RBAC's. (kube's "edit" ClusterRole is
// aggregated by the controller-manager, which does not run here.)
func grantEdit(t *testing.T, ns string, users ...string) {
	t.Helper()
	grantRole(t, ns, "edit", []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}, users...)
}

// as is a client of the API server acting as user.
func as(t *testing.T, user string) (client.Client, *kubernetes.Clientset) {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, kubernetes.NewForConfigOrDie(cfg)
}

func evictAs(cs *kubernetes.Clientset, ns, pod string) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
	return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("eviction").
		Body(ev).MaxRetries(0).Do(context.Background()).Error()
}

// TestDenyWindow: during a Deny window a new rollout is refused (403, naming the window),
// a rollback to the serving revision passes, and an eviction is deferred (429).
func TestDenyWindow(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := settlePolicy()
	p.Spec.Windows = alwaysFrozen
	applyPolicy(t, ns, p)

	d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatalf("creating a workload is no rollout: %v", err)
	}
	addRevision(t, d, "1")
	// A's ReplicaSet serves: the Deployment controller would have scaled it up.
	rs := &appsv1.ReplicaSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.Name + "-rev1"}, rs); err != nil {
		t.Fatal(err)
	}
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: rs.Generation}
	if err := k8s.Status().Update(ctx, rs); err != nil {
		t.Fatal(err)
	}
	d = rolledOut(t, d)
	journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	err := k8s.Update(ctx, withImage(d, "registry.example/main:B"))
	assertHoldfastDenied(t, err, rollout.RuleWindow, "spec.template")
	if !strings.Contains(err.Error(), `window "freeze" until`) {
		t.Errorf("the refusal does not name the window and its end: %v", err)
	}
	refused := 1

	// A rollback: B rolls out (admitted before the freeze, by an exempt hand), A still serves.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Exemptions.Users = []string{"release-manager"}
		return k8s.Update(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	grantEdit(t, ns, "release-manager")
	intercepted(t, p) // and so the cache has the exemption
	rm, _ := as(t, "release-manager")
	b := withImage(d, "registry.example/main:B")
	if err := rm.Update(ctx, b); err != nil {
		t.Fatalf("the exempt release manager: %v", err)
	}
	deploymentStatus(t, b, 1, 2, 4)
	journalOf(t, v1alpha1.KindDeployment, ns, b.Name, b.Generation)
	back := withImage(b, "registry.example/main:1")
	rollbackAdmitted := k8s.Update(ctx, back) == nil
	if !rollbackAdmitted {
		t.Errorf("a rollback to the serving revision must pass in a Deny window")
	}

	dp := createNamespace(t, nil)
	disruptionPolicy(t, dp, func(s *v1alpha1.DisruptionPolicySpec) { s.Windows = alwaysFrozen })
	pods := agentGroup(t, dp, 3)
	err = evict(t, dp, pods[0].Name, false)
	assertDeferred(t, err)
	if !strings.Contains(err.Error(), "/window]") {
		t.Errorf("the deferral does not name the window rule: %v", err)
	}
	fmt.Printf("SCENARIO window-freeze rolloutsRefused=%d evictionsDeferred=1 rollbackAdmitted=%t\n", refused, rollbackAdmitted)
}

// TestTemporaryExemption: a live temporary exemption lets the on-call engineer through the
// freeze; once it has expired, the same change is refused again.
func TestTemporaryExemption(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := settlePolicy()
	p.Spec.Windows = alwaysFrozen
	p.Spec.Exemptions.Temporary = []v1alpha1.TemporaryExemption{{Users: []string{"oncall"}, Expires: metav1.NewTime(time.Now().Add(4 * time.Second)), Reason: "INC-42"}}
	applyPolicy(t, ns, p)
	grantEdit(t, ns, "oncall")
	oncall, _ := as(t, "oncall")

	d := utiltesting.MakeDeployment(ns, "kas").Replicas(3).Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	d = rolledOut(t, d)
	journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	b := withImage(d, "registry.example/main:B")
	if err := oncall.Update(ctx, b); err != nil {
		t.Fatalf("the on-call engineer within the exemption: %v", err)
	}
	b = rolledOut(t, b)
	time.Sleep(time.Until(p.Spec.Exemptions.Temporary[0].Expires.Time) + time.Second)
	journalOf(t, v1alpha1.KindDeployment, ns, b.Name, b.Generation)
	assertHoldfastDenied(t, oncall.Update(ctx, withImage(b, "registry.example/main:C")), rollout.RuleWindow, "spec.template")

	// The policy's status says which expired.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := &v1alpha1.RolloutPolicy{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), got); err == nil &&
			len(got.Status.ExpiredExemptions) == 1 && got.Status.ExpiredExemptions[0] == "INC-42" && got.Status.ActiveWindow == "freeze" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status never named the expired exemption and the active window: %+v", got.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRequesterBudgets: the autoscaler's identity is held at 0 (403, for good) while a
// human's drain goes one at a time (429, then allowed).
func TestRequesterBudgets(t *testing.T) {
	ns := createNamespace(t, nil)
	const autoscaler = "system:serviceaccount:kube-system:cluster-autoscaler"
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) {
		s.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		s.Requesters = []v1alpha1.Requester{{ServiceAccounts: []string{"kube-system/cluster-autoscaler"}, MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	})
	grantEdit(t, ns, autoscaler, "alice")
	pods := agentGroup(t, ns, 3)
	_, auto := as(t, autoscaler)
	_, alice := as(t, "alice")

	autoscalerAllowed := 0
	for _, p := range pods {
		err := evictAs(auto, ns, p.Name)
		if err == nil {
			autoscalerAllowed++
		} else if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "holdfast") {
			t.Errorf("the autoscaler evicting %s: %v, want holdfast's 403", p.Name, err)
		}
	}
	if err := evictAs(alice, ns, pods[0].Name); err != nil {
		t.Fatalf("the human's first eviction: %v", err)
	}
	assertDeferred(t, evictAs(alice, ns, pods[1].Name))
	fmt.Printf("SCENARIO requester-budgets autoscalerAllowed=%d humanAllowed=1 humanNextDeferred=true\n", autoscalerAllowed)
	if autoscalerAllowed != 0 {
		t.Errorf("the autoscaler evicted %d pods, want 0", autoscalerAllowed)
	}
}

// TestInvalidWindowsAreRefusedAtCreation: a window only holdfast can check (the hour 25,
// an unknown zone, an interval or a date that never opens) is refused when the policy is
// written, naming the field.
func TestInvalidWindowsAreRefusedAtCreation(t *testing.T) {
	p := utiltesting.MakeRolloutPolicy("bad-window").Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
	p.Spec.Windows = []v1alpha1.Window{{Schedule: "0 25 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}
	err := k8s.Create(context.Background(), p)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.windows[0].schedule") {
		t.Fatalf("creating a policy with the hour 25: %v, want 422 naming spec.windows[0].schedule", err)
	}
	p.Spec.Windows = []v1alpha1.Window{{Schedule: "0 9 * * *", TimeZone: "Mars/Olympus", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}
	if err := k8s.Create(context.Background(), p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.windows[0].timeZone") {
		t.Fatalf("creating a policy with an unknown zone: %v, want 422 naming spec.windows[0].timeZone", err)
	}
	for _, never := range []string{"@every 2h", "0 0 31 4 *"} {
		p.Spec.Windows = []v1alpha1.Window{{Schedule: never, Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowAllow}}
		if err := k8s.Create(context.Background(), p); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.windows[0].schedule") {
			t.Fatalf("creating a policy whose window %q never opens: %v, want 422 naming spec.windows[0].schedule", never, err)
		}
	}
}
