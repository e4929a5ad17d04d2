//go:build integration

package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
)

// grantDelete lets the users delete and evict pods in the namespace, so that what they are
// refused is holdfast's refusal, not RBAC's.
func grantDelete(t *testing.T, ns string, users ...string) {
	t.Helper()
	grantRole(t, ns, "delete-pods", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}, users...)
	// The API server's RBAC authorizer reads bindings from its cache: wait until it allows.
	for _, u := range users {
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: u,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Resource: "pods"}}}
			if err := k8s.Create(ctx, sar); err != nil {
				return false, err
			}
			return sar.Status.Allowed, nil
		})
		if err != nil {
			t.Fatalf("%s is never allowed to delete pods in %s: %v", u, ns, err)
		}
	}
}

// deletePod deletes the pod as kubectl delete pod does: client-go's own client, with its
// retries left on (it retries a 429 only when it carries Retry-After).
func deletePod(cs *kubernetes.Clientset, ns, pod string) error {
	return cs.CoreV1().Pods(ns).Delete(context.Background(), pod, metav1.DeleteOptions{})
}

// assertDeleteHeld checks that err is holdfast's refusal of a delete through the delete
// entry: 429 without a retry-after, holdfast's cause, the policy named and the way to evict
// instead in the message.
func assertDeleteHeld(t *testing.T, err error, policy string) {
	t.Helper()
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("got %v, want 429 TooManyRequests", err)
	}
	if !apierrors.HasStatusCause(err, eviction.CauseType) {
		t.Errorf("429 without holdfast's cause: %v", err)
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Details != nil && se.Status().Details.RetryAfterSeconds != 0 {
		t.Errorf("retryAfterSeconds = %d, want none (client-go would retry the DELETE inside the call)", se.Status().Details.RetryAfterSeconds)
	}
	msg, ok := deniedBy(err, interception.TypeDelete)
	if !ok {
		t.Fatalf("the refusal %q did not come through the delete entry", err)
	}
	for _, want := range []string{"[" + policy + "/", "evict the pod instead", "kubectl drain without --disable-eviction"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
}

// TestGuardedDeletes: under a DisruptionPolicy with guardDeletes, a non-admin's DELETE of
// a Ready pod is held when an eviction has spent the budget; the break-glass identity's
// passes, and so does a delete of a pod that is not Ready. In another group, an admitted
// delete is recorded in the group's ledger (as a delete, by addition) and an eviction
// inside the cooldown after it is deferred: one budget both ways.
func TestGuardedDeletes(t *testing.T) {
	ctx := context.Background()
	guard := func(ns string) string {
		disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) {
			s.GuardDeletes = true
			s.Cooldown = &metav1.Duration{Duration: time.Hour}
			s.Exemptions.Users = []string{"break-glass"}
		})
		return ns + "-agents"
	}

	t.Run("a delete when an eviction has spent the budget", func(t *testing.T) {
		ns := createNamespace(t, nil)
		agentGroup(t, ns, 4)
		policy := guard(ns)
		grantDelete(t, ns, "oncall", "break-glass")
		_, oncall := as(t, "oncall")
		_, breakGlass := as(t, "break-glass")

		if err := evict(t, ns, "agent-0", false); err != nil {
			t.Fatalf("the first eviction: %v", err)
		}
		assertDeleteHeld(t, deletePod(oncall, ns, "agent-1"), policy)

		// A pod that is not Ready serves nothing: the API server does not even ask.
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent-2"}, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		if err := k8s.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := deletePod(oncall, ns, "agent-2"); err != nil {
			t.Errorf("the delete of a pod that is not Ready: %v", err)
		}
		if err := deletePod(breakGlass, ns, "agent-1"); err != nil {
			t.Errorf("the break-glass identity's delete: %v", err)
		}
	})

	t.Run("an eviction inside the cooldown after a delete", func(t *testing.T) {
		ns := createNamespace(t, nil)
		agentGroup(t, ns, 4)
		policy := guard(ns)
		grantDelete(t, ns, "oncall")
		_, oncall := as(t, "oncall")

		if err := deletePod(oncall, ns, "agent-0"); err != nil {
			t.Fatalf("the first delete: %v", err)
		}
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, d); err != nil {
			t.Fatal(err)
		}
		l := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, budget.GroupKey(holdfastNamespace, d.UID), l); err != nil {
			t.Fatalf("the group's ledger: %v", err)
		}
		if rec := l.Annotations[budget.EvictionsAnnotation]; !strings.Contains(rec, `"pod":"agent-0"`) || !strings.Contains(rec, `"via":"delete"`) {
			t.Errorf("the ledger records %s, want agent-0's delete", rec)
		}
		// agent-0 is gone (envtest deletes an unscheduled pod at once): the budget of one
		// is spent by the delete too, but the cooldown is what holds a Ready pod now.
		err := evict(t, ns, "agent-1", false)
		assertDeferred(t, err)
		if msg, _ := deniedBy(err, interception.TypeEviction); !strings.Contains(msg, "["+policy+"/cooldown]") {
			t.Errorf("the eviction after the delete: %q, want it held by the cooldown", msg)
		}
		assertDeleteHeld(t, deletePod(oncall, ns, "agent-2"), policy)
	})
}
