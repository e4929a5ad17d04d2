//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/podscope"
	"github.com/holdfast-dev/holdfast/internal/policy"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// envtest runs no controllers and no kubelet: the tests write the ReplicaSet and Ready
// pods a Deployment would have. Unscheduled pods are deleted at once when evicted.

// appGroup creates a Deployment named app (its pods labelled app=<app>), its ReplicaSet and
// n Running pods, the first notReady of them not Ready. It does not wait for any cache.
func appGroup(t *testing.T, ns, app string, n, notReady int32) (*appsv1.ReplicaSet, []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	d := utiltesting.MakeDeployment(ns, app).Replicas(n).Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-1", Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: d.Spec.Template.Spec,
		}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		ready := corev1.ConditionTrue
		if i < notReady {
			ready = corev1.ConditionFalse
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}}
		if err := k8s.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	return rs, pods
}

// agentGroup creates a Deployment of n Ready pods (through a ReplicaSet) labelled app=agent
// and waits until holdfast's cache has them.
func agentGroup(t *testing.T, ns string, n int32) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	rs, pods := appGroup(t, ns, "agent", n, 0)
	// holdfast reads a guarded group's pods from the watch its plan covers them with, and an
	// unguarded one's from the API server: for a guarded group, wait until that watch has
	// synced and holds the pods Ready.
	sel := labels.SelectorFromSet(labels.Set{"app": "agent"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		ready := 0
		watched := willWatch(ctx, t, ns, sel)
		for _, p := range pods {
			var got corev1.Pod
			if !watched || (podScope.Covered(ns, sel) && cached.Get(ctx, client.ObjectKeyFromObject(p), &got) == nil && len(got.Status.Conditions) > 0) {
				ready++
			}
		}
		if ready == int(n) && cached.Get(ctx, client.ObjectKeyFromObject(rs), &appsv1.ReplicaSet{}) == nil &&
			cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, &appsv1.Deployment{}) == nil {
			return pods
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group never reached holdfast's cache")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// willWatch reports whether holdfast's pod scope, planned from its cache as it stands, has
// a watch for the pods in ns that sel selects.
func willWatch(ctx context.Context, t *testing.T, ns string, sel labels.Selector) bool {
	t.Helper()
	guarded, err := podscope.GuardedSelectors(ctx, cached, policy.NewMatcher())
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range podscope.Plan(guarded) {
		if sp.Covers(ns, sel) {
			return true
		}
	}
	return false
}

func disruptionPolicy(t *testing.T, ns string, mut func(*v1alpha1.DisruptionPolicySpec)) {
	t.Helper()
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-agents"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Targets: v1alpha1.PodTargets{NamespaceSelector: namespaceNamed(ns),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}
	if mut != nil {
		mut(&p.Spec)
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
}

// evict posts an Eviction without client-go's silent retries of 429s that carry
// Retry-After, so that the test sees holdfast's first answer.
func evict(t *testing.T, ns, pod string, dryRun bool) error {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(restConfig)
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
	if dryRun {
		ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("eviction").
		Body(ev).MaxRetries(0).Do(context.Background()).Error()
}

// assertDeferred checks that err is holdfast's 429: kube's DisruptionBudget cause, a
// retry-after of at most 10 s, and the holdfast webhook named in the message.
func assertDeferred(t *testing.T, err error) {
	t.Helper()
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("got %v, want 429 TooManyRequests", err)
	}
	if !apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause) {
		t.Errorf("429 without a DisruptionBudget cause: %v", err)
	}
	if msg, ok := deniedBy(err, interception.TypeEviction); !ok || !strings.HasPrefix(msg, "holdfast:") {
		t.Errorf("the deferral %q is not recognisably holdfast's", err)
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		if s := se.Status().Details.RetryAfterSeconds; s < 1 || s > 10 {
			t.Errorf("retryAfterSeconds = %d, want 1..10", s)
		}
	}
}

func TestEvictionBudget(t *testing.T) {
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, nil)
	pods := agentGroup(t, ns, 3)

	if err := evict(t, ns, pods[2].Name, true); err != nil {
		t.Fatalf("a dry-run eviction within budget: %v", err)
	}
	// The dry run recorded nothing, so an eviction of another pod is still the first.
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}
	assertDeferred(t, evict(t, ns, pods[1].Name, false))
	assertDeferred(t, evict(t, ns, pods[1].Name, true))
	if err := evict(t, ns, "no-such-pod", false); !apierrors.IsNotFound(err) {
		t.Errorf("evicting a missing pod: got %v, want the API server's 404", err)
	}
}

// anyNumberAnHourApart is a policy whose cooldown alone holds evictions back.
func anyNumberAnHourApart(s *v1alpha1.DisruptionPolicySpec) {
	s.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	s.Cooldown = &metav1.Duration{Duration: time.Hour}
}

func TestEvictionCooldownAndNever(t *testing.T) {
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, anyNumberAnHourApart)
	pods := agentGroup(t, ns, 3)
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}
	err := evict(t, ns, pods[1].Name, false)
	assertDeferred(t, err)
	if !strings.Contains(err.Error(), "/cooldown]") {
		t.Errorf("deferral %q does not name the cooldown rule", err)
	}

	other := createNamespace(t, nil)
	disruptionPolicy(t, other, func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) })
	never := agentGroup(t, other, 2)
	if err := evict(t, other, never[0].Name, false); !apierrors.IsForbidden(err) {
		t.Errorf("a budget of zero: got %v, want 403", err)
	}
}

// TestEvictionRace sends concurrent evictions of distinct pods of one group with a
// budget of one: the ledger lets exactly one through, before any informer has seen it.
func TestEvictionRace(t *testing.T) {
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, nil)
	pods := agentGroup(t, ns, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed, deferred := 0, 0
	for _, p := range pods {
		wg.Go(func() {
			err := evict(t, ns, p.Name, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				allowed++
			case apierrors.IsTooManyRequests(err):
				deferred++
			default:
				t.Errorf("eviction of %s: %v", p.Name, err)
			}
		})
	}
	wg.Wait()
	t.Logf("concurrent evictions: %d allowed, %d deferred", allowed, deferred)
	if allowed != 1 || deferred != len(pods)-1 {
		t.Errorf("allowed %d, deferred %d; want exactly 1 allowed with a budget of 1", allowed, deferred)
	}
}

// TestInvalidSelectorsAreRefusedAtCreation: a selector kube cannot parse would leave a
// policy that can be evaluated for no pod; the API refuses the operators and values it
// can check cheaply with 422 naming the field. (Label keys and values are left to
// TestInvalidPolicySelectsNothing: checking every key of an unbounded map
// costs more than the API server's CEL budget allows.)
func TestInvalidSelectorsAreRefusedAtCreation(t *testing.T) {
	cases := map[string]struct {
		mut   func(*v1alpha1.PodTargets)
		field string
	}{
		"an unknown operator": {func(t *v1alpha1.PodTargets) {
			t.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near", Values: []string{"cp"}}}}
		}, "spec.targets.namespaceSelector"},
		"In without values": {func(t *v1alpha1.PodTargets) {
			t.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}
		}, "spec.targets.namespaceSelector"},
		"Exists with values": {func(t *v1alpha1.PodTargets) {
			t.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}}}
		}, "spec.targets.selector"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "invalid-selector"},
				Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
			tc.mut(&p.Spec.Targets)
			err := k8s.Create(context.Background(), p, client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want 422 naming %s", err, tc.field)
			}
		})
	}
	valid := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "valid-selector"},
		Spec: v1alpha1.DisruptionPolicySpec{Targets: v1alpha1.PodTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"konnectivity-agent", "kiam"}},
				{Key: "holdfast.dev/skip", Operator: metav1.LabelSelectorOpDoesNotExist}}}}}}
	if err := k8s.Create(context.Background(), valid, client.DryRunAll); err != nil {
		t.Fatalf("a valid selector refused: %v", err)
	}
}

// TestInvalidPolicySelectsNothing: a policy whose namespaceSelector has a key kube
// cannot parse (the CRDs refuse it since their selector rules; one is stored only before
// them, while holdfast's policy webhook was down) reports Ready=False InvalidSelector and Intercepted=False,
// and selects nothing: two evictions of the pods it was meant for (maxUnavailable 1) are
// both admitted, rather than every eviction in the cluster deferred until it is fixed.
func TestInvalidPolicySelectsNothing(t *testing.T) {
	ns := createNamespace(t, nil)
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-agents"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}
	withPreviousCRDs(t, func() {
		withoutPolicyValidation(t, func() {
			if err := k8s.Create(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := &v1alpha1.DisruptionPolicy{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), got); err == nil {
			ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			intercepted := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionIntercepted)
			if ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == v1alpha1.ReasonInvalidSelector && got.Status.ObservedGeneration == got.Generation &&
				intercepted != nil && intercepted.Status == metav1.ConditionFalse && intercepted.Reason == v1alpha1.ReasonInvalidSelector {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the policy with an invalid selector never reported Ready=False and Intercepted=False InvalidSelector")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pods := agentGroup(t, ns, 2) // labelled app=agent: the policy's valid selector selects them
	for _, pod := range pods {
		if err := evict(t, ns, pod.Name, false); err != nil {
			t.Errorf("evicting %s, which the invalid policy was meant to guard: %v, want it admitted (the policy selects nothing)", pod.Name, err)
		}
	}
}
