//go:build integration

package integration

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/charts"
)

// TestChartAppliesToTheAPIServer sends every object the chart renders to the real API
// server (server-side dry run): each must pass its validation, the webhook configuration's
// matchConditions, the RBAC rules and the CRDs (applied over the suite's) included.
func TestChartAppliesToTheAPIServer(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":         nil,
		"with the samples": {"samples": map[string]any{"enabled": true}},
		"fail closed, one replica": {"replicaCount": 1, "webhook": map[string]any{
			"rollout": map[string]any{"failurePolicy": "Fail"}, "eviction": map[string]any{"failurePolicy": "Fail"}}},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := charts.Render(holdfastNamespace, values)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range objs {
				apart(u)
				err := k8s.Create(context.Background(), u, client.DryRunAll)
				if u.GetKind() == "CustomResourceDefinition" {
					// The suite installed them: applied over, as helm upgrade does.
					err = k8s.Patch(context.Background(), u, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner("helm"))
				}
				if err != nil {
					t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}

// apart renames a webhook configuration of holdfast's, which the suite's holdfast has
// installed under the same name, so that its dry-run create does not collide with it.
func apart(u client.Object) {
	if u.GetObjectKind().GroupVersionKind().Kind == "ValidatingWebhookConfiguration" {
		u.SetName("dry-run-" + u.GetName())
	}
}

// TestChartPodsAreRestricted creates the chart's pod, as its Deployment would, in a
// namespace that enforces the restricted Pod Security Standard (server-side dry run): the
// API server's PodSecurity admission must accept it. A privileged pod is refused there,
// which shows the standard is enforced.
func TestChartPodsAreRestricted(t *testing.T) {
	ns := createNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest"})
	objs, err := charts.Render(ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("the chart renders no Deployment")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holdfast", Labels: d.Spec.Template.Labels},
		Spec: *d.Spec.Template.Spec.DeepCopy()}
	pod.Spec.ServiceAccountName = "" // the service account is not installed here; it does not bear on the standard
	pod.Spec.PriorityClassName = ""  // nor does the priority class, which admission resolves
	if err := k8s.Create(context.Background(), pod, client.DryRunAll); err != nil {
		t.Errorf("the chart's pod is refused under the restricted Pod Security Standard: %v", err)
	}
	privileged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "privileged"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
	if err := k8s.Create(context.Background(), privileged, client.DryRunAll); err == nil {
		t.Error("a privileged pod was accepted: the namespace does not enforce the restricted standard, so the check above proves nothing")
	}
}
