//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/interception"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// applyPolicy creates a policy scoped to one namespace and waits until the API server sends
// what it guards to holdfast.
func applyPolicy(t *testing.T, ns string, p *v1alpha1.RolloutPolicy) {
	t.Helper()
	ctx := context.Background()
	p.Name = ns + "-" + p.Name
	p.Spec.Targets.NamespaceSelector = namespaceNamed(ns)
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("creating RolloutPolicy: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
}

func konnectivity(ns string, replicas int32, serverCount string) *appsv1.Deployment {
	return utiltesting.MakeDeployment(ns, "kube-apiserver").Replicas(replicas).
		Container("konnectivity-server", "--server-count="+serverCount).Obj()
}

// webhookDenial is how the API server words a webhook's refusal: the entry's name, then
// the webhook's message.
var webhookDenial = regexp.MustCompile(`^admission webhook "([^"]+)" denied the request: (.*)$`)

// deniedBy returns the message of err when one of holdfast's entries of the type (e.g.
// interception.TypeRollout) refused the request.
func deniedBy(err error, typ string) (string, bool) {
	if err == nil {
		return "", false
	}
	m := webhookDenial.FindStringSubmatch(err.Error())
	if m == nil || !strings.HasSuffix(m[1], "."+typ) {
		return "", false
	}
	return m[2], true
}

// assertHoldfastDenied checks that err is holdfast's rollout denial: 403, from the
// rollout webhook, with a cause naming the rule and the field.
func assertHoldfastDenied(t *testing.T, err error, rule, field string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want 403 Forbidden from holdfast", err)
	}
	_, byRollout := deniedBy(err, interception.TypeRollout)
	if _, byScale := deniedBy(err, interception.TypeScale); !byRollout && !byScale {
		t.Errorf("denial %q does not name holdfast's webhook", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Fatalf("denial carries no status details: %v", err)
	}
	found := slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool {
		return c.Type == rollout.CauseType && c.Field == field && strings.Contains(c.Message, "/"+rule+"]")
	})
	if !found {
		t.Errorf("no %s cause for rule %s at %s in %+v", rollout.CauseType, rule, field, status.Status().Details.Causes)
	}
}

func TestRolloutArgsMatchReplicas(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	flag := "spec.template.spec.containers[1].args[0]"

	t.Run("create with a mismatched flag is denied", func(t *testing.T) {
		err := k8s.Create(ctx, konnectivity(ns, 3, "1"))
		assertHoldfastDenied(t, err, rollout.RuleArgsMatchReplicas, flag)
	})
	t.Run("server-side dry run is denied too", func(t *testing.T) {
		err := k8s.Create(ctx, konnectivity(ns, 3, "1"), client.DryRunAll)
		assertHoldfastDenied(t, err, rollout.RuleArgsMatchReplicas, flag)
	})

	d := konnectivity(ns, 3, "3")
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatalf("create with a matching flag: %v", err)
	}
	t.Run("scale without the flag is denied", func(t *testing.T) {
		scaled := d.DeepCopy()
		scaled.Spec.Replicas = ptr.To[int32](5)
		assertHoldfastDenied(t, k8s.Update(ctx, scaled), rollout.RuleArgsMatchReplicas, flag)
	})
	t.Run("scale with the flag is allowed", func(t *testing.T) {
		scaled := d.DeepCopy()
		scaled.Spec.Replicas = ptr.To[int32](5)
		scaled.Spec.Template.Spec.Containers[1].Args = []string{"--server-count=5"}
		if err := k8s.Update(ctx, scaled); err != nil {
			t.Fatalf("scale with the flag: %v", err)
		}
	})
	t.Run("workloads in other namespaces are not guarded", func(t *testing.T) {
		other := createNamespace(t, nil)
		if err := k8s.Create(ctx, konnectivity(other, 3, "1")); err != nil {
			t.Fatalf("create outside the policy's namespaces: %v", err)
		}
	})
}

func TestRolloutWarnMode(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").Mode(v1alpha1.ModeWarn).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	warnings.take()
	if err := k8s.Create(ctx, konnectivity(ns, 3, "1")); err != nil {
		t.Fatalf("Warn mode must admit: %v", err)
	}
	got := warnings.take()
	if !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "/"+rollout.RuleArgsMatchReplicas+"]") }) {
		t.Errorf("warnings = %q, want one from %s", got, rollout.RuleArgsMatchReplicas)
	}
}

// TestExemptionIsNotTheWorkloadsToGrant checks that whoever may edit a guarded workload
// cannot exempt the edit through the workload itself: annotations that read like an
// exemption change nothing, and relabelling the workload out of the policy's selector in
// the same edit does not carry a forbidden change past it. Exemptions live in the policy.
func TestExemptionIsNotTheWorkloadsToGrant(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").Selector(map[string]string{"app": "kube-apiserver"}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	d := konnectivity(ns, 3, "3")
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	flag := "spec.template.spec.containers[1].args[0]"
	t.Run("exemption-like annotations", func(t *testing.T) {
		c := d.DeepCopy()
		c.Annotations = map[string]string{"holdfast.dev/exempt": "true", "holdfast.dev/suspend": "true", "holdfast.dev/skip": "true"}
		c.Spec.Template.Annotations = c.Annotations
		c.Spec.Replicas = ptr.To[int32](5)
		assertHoldfastDenied(t, k8s.Update(ctx, c), rollout.RuleArgsMatchReplicas, flag)
	})
	t.Run("relabelled out of the selector in the same edit", func(t *testing.T) {
		c := d.DeepCopy()
		c.Labels = map[string]string{"app": "something-else"}
		c.Spec.Replicas = ptr.To[int32](5)
		err := k8s.Update(ctx, c)
		if !apierrors.IsForbidden(err) {
			t.Fatalf("got %v, want holdfast's denial", err)
		}
	})
	// A relabel alone out of the policy is the first step of a two-step walk around every
	// rule: once unselected, the workload takes any change.
	t.Run("relabelled out of the selector alone", func(t *testing.T) {
		c := d.DeepCopy()
		c.Labels = map[string]string{"app": "something-else"}
		assertHoldfastDenied(t, k8s.Update(ctx, c), rollout.RuleSelection, "metadata.labels")
	})
	t.Run("relabelled within the selector", func(t *testing.T) {
		c := d.DeepCopy()
		c.Labels["team"] = "control-plane"
		if err := k8s.Update(ctx, c); err != nil {
			t.Fatalf("a relabel that keeps the workload selected: %v", err)
		}
	})
}

// TestDaemonSetCreateCountsNodes is finding 5 of the outcome issue, through the API server:
// a DaemonSet CREATE carries no status (the API server clears it), so its maxUnavailable
// 100% resolved against 0 pods passed a limit of 1. holdfast resolves it against the
// cached nodes its node selector matches: with three such nodes it is refused.
func TestDaemonSetCreateCountsNodes(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	pool := "holdfast.dev/integration-" + ns
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, i), Labels: map[string]string{pool: "true"}}}
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
		// The API server taints a new node not-ready (NoSchedule, TaintNodesByCondition),
		// which a daemon pod does not tolerate; no controller here ever makes it Ready.
		n.Spec.Taints = nil
		if err := k8s.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	p := utiltesting.MakeRolloutPolicy("agents").Kinds(v1alpha1.KindDaemonSet).Obj()
	p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	applyPolicy(t, ns, p)
	ds := func(nodeSelector map[string]string) *appsv1.DaemonSet {
		labels := map[string]string{"app": "agent"}
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("100%"))}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}}}
	}
	// The nodes reach holdfast's cache a moment after they are created.
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for err = k8s.Create(ctx, ds(map[string]string{pool: "true"}), client.DryRunAll); err == nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		err = k8s.Create(ctx, ds(map[string]string{pool: "true"}), client.DryRunAll)
	}
	assertHoldfastDenied(t, err, rollout.RuleStrategy, "spec.updateStrategy.rollingUpdate.maxUnavailable")
	if !strings.Contains(err.Error(), "lets 3 of 3 pods go at once") {
		t.Errorf("the refusal does not count the three nodes: %v", err)
	}
	// A node selector no node matches runs nowhere: nothing to take down.
	if err := k8s.Create(ctx, ds(map[string]string{pool: "elsewhere"}), client.DryRunAll); err != nil {
		t.Errorf("a DaemonSet that runs on no node: %v", err)
	}
}
