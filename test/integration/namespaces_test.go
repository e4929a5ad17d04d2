//go:build integration

package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// TestNamespaceRelabelBringsItsWorkloadsState: through the real API server, a namespace
// relabel that brings a workload into a RolloutPolicy's selection is judged on what the
// workload brings: refused (403 naming the namespace, the workload and the way out) while
// its rollout is unfinished, admitted once it finished. Label edits that change no
// policy's selection (Pod Security's) never reach holdfast, and moving it out is admitted.
func TestNamespaceRelabelBringsItsWorkloadsState(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	onboard := map[string]string{"onboarded-" + ns: "true"}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-onboarded"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: onboard}},
		Rules:   v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}}}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)

	d := corpusWorkload(v1alpha1.KindDeployment, ns, "kube-apiserver")
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Its controller has not acted: the rollout is unfinished.
	eventually(t, "the workload in holdfast's cache", func() bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(d), d.DeepCopyObject().(client.Object)) == nil
	})
	relabel := func(mut func(map[string]string)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n := &corev1.Namespace{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
				return err
			}
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			mut(n.Labels)
			return k8s.Update(ctx, n)
		})
	}
	in := func(l map[string]string) {
		for k, v := range onboard {
			l[k] = v
		}
	}
	before := len(namespaceCalls(ns))
	if err := relabel(func(l map[string]string) { l["pod-security.kubernetes.io/enforce"] = "baseline" }); err != nil {
		t.Fatal(err)
	}
	err := relabel(in)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "relabelling namespace "+ns) ||
		!strings.Contains(err.Error(), "kube-apiserver") || !strings.Contains(err.Error(), "let the rollout finish") {
		t.Fatalf("bringing an unfinished rollout into the policy by a namespace relabel: %v, want 403 naming the namespace, the workload and the way out", err)
	}
	if calls := namespaceCalls(ns)[before:]; len(calls) != 1 {
		t.Errorf("holdfast was called %d times (%v), want once: the Pod Security label changes no selection", len(calls), calls)
	}
	writeFinishedStatus(t, d)
	eventually(t, "the relabel admitted once the rollout finished", func() bool { return relabel(in) == nil })
	if err := relabel(func(l map[string]string) { delete(l, "onboarded-"+ns) }); err != nil {
		t.Fatalf("moving the namespace out of the policy: %v", err)
	}
}

// namespaceCalls are the namespace requests about ns that reached holdfast.
func namespaceCalls(ns string) []string {
	var out []string
	for _, c := range append(callsIn(ns), callsIn("")...) {
		if strings.HasSuffix(c, " namespaces "+ns) {
			out = append(out, c)
		}
	}
	return slices.Clip(out)
}
