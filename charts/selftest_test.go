package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestRenderSelfTest holds the `helm test` pod to what docs/operations.md ("Self-test")
// says: it runs holdfast selftest from holdfast's image against the release's webhook
// configuration, as an identity of its own with the least rights the probes need, and that
// identity may send dry runs only. Everything is created by `helm test` alone.
func TestRenderSelfTest(t *testing.T) {
	objs, err := render(t, "ops", map[string]any{"fullnameOverride": "guard"})
	if err != nil {
		t.Fatal(err)
	}
	const name = "guard-selftest"
	for _, key := range []string{"ServiceAccount/" + name, "ClusterRole/" + name, "ClusterRoleBinding/" + name,
		"ValidatingAdmissionPolicy/" + name + "-dry-run-only", "ValidatingAdmissionPolicyBinding/" + name + "-dry-run-only", "Pod/" + name} {
		u := objs[key]
		if u == nil {
			t.Fatalf("missing %s", key)
		}
		if u.GetAnnotations()["helm.sh/hook"] != "test" {
			t.Errorf("%s is not a test hook: helm install would create it", key)
		}
	}

	var pod corev1.Pod
	typed(t, objs["Pod/"+name], &pod)
	var dep appsv1.Deployment
	typed(t, objs["Deployment/guard"], &dep)
	d := dep.Spec.Template.Spec
	c := pod.Spec.Containers[0]
	if c.Image != d.Containers[0].Image || !slices.Equal(c.Args, []string{"selftest", "--webhook-configuration=guard"}) {
		t.Errorf("self-test container: image %s (holdfast's %s), args %v", c.Image, d.Containers[0].Image, c.Args)
	}
	if pod.Spec.ServiceAccountName != name || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("serviceAccountName %q, restartPolicy %q", pod.Spec.ServiceAccountName, pod.Spec.RestartPolicy)
	}
	assertRestricted(t, &pod.Spec)
	// Not one of holdfast's pods: its Services and PodDisruptionBudget never select it.
	for _, key := range []string{"Service/guard-webhook", "Service/guard-metrics"} {
		var svc corev1.Service
		typed(t, objs[key], &svc)
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			t.Errorf("%s selects the self-test pod", key)
		}
	}

	var role rbacv1.ClusterRole
	typed(t, objs["ClusterRole/"+name], &role)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{"guard", "guard-guards"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}},
		{APIGroups: []string{"holdfast.dev"}, Resources: []string{"rolloutpolicies"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"create"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, ResourceNames: []string{"holdfast-selftest"}, Verbs: []string{"create"}},
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("self-test ClusterRole rules (-want +chart):\n%s", diff)
	}
	var binding rbacv1.ClusterRoleBinding
	typed(t, objs["ClusterRoleBinding/"+name], &binding)
	if binding.RoleRef.Name != name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != name || binding.Subjects[0].Namespace != "ops" {
		t.Errorf("binding %+v, want %s's ServiceAccount in ops bound to its ClusterRole", binding, name)
	}

	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	typed(t, objs["ValidatingAdmissionPolicy/"+name+"-dry-run-only"], &vap)
	if len(vap.Spec.MatchConditions) != 1 || !strings.Contains(vap.Spec.MatchConditions[0].Expression, `"system:serviceaccount:ops:guard-selftest"`) ||
		len(vap.Spec.Validations) != 1 || vap.Spec.Validations[0].Expression != "request.dryRun" ||
		vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("the admission policy must refuse every request of the self-test's identity that is not a dry run: %+v", vap.Spec)
	}
	rules := vap.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Contains(rules[0].Resources, "*/*") || !slices.Contains(rules[0].Operations, admissionregistrationv1.Create) {
		t.Errorf("the admission policy must match every resource and subresource (pods/eviction): %+v", rules)
	}
	var vapb admissionregistrationv1.ValidatingAdmissionPolicyBinding
	typed(t, objs["ValidatingAdmissionPolicyBinding/"+name+"-dry-run-only"], &vapb)
	if vapb.Spec.PolicyName != vap.Name || !slices.Equal(vapb.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v must deny with %s", vapb.Spec, vap.Name)
	}
}
