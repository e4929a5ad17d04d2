package policy

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

func TestExempt(t *testing.T) {
	e := v1alpha1.Exemptions{
		Users:           []string{"alice"},
		Groups:          []string{"breakglass"},
		ServiceAccounts: []string{"kube-system/horizontal-pod-autoscaler"},
	}
	cases := map[string]struct {
		user authenticationv1.UserInfo
		want bool
	}{
		"listed user":            {authenticationv1.UserInfo{Username: "alice"}, true},
		"other user":             {authenticationv1.UserInfo{Username: "bob"}, false},
		"member of listed group": {authenticationv1.UserInfo{Username: "bob", Groups: []string{"dev", "breakglass"}}, true},
		"listed service account": {authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}, true},
		"same name, other namespace": {
			authenticationv1.UserInfo{Username: "system:serviceaccount:default:horizontal-pod-autoscaler"}, false},
		"user named like the service account is not it": {authenticationv1.UserInfo{Username: "kube-system/horizontal-pod-autoscaler"}, false},
		"anonymous": {authenticationv1.UserInfo{}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Exempt(e, tc.user); got != tc.want {
				t.Errorf("Exempt = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelects(t *testing.T) {
	tenant := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "tenant"}}
	cp := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "component", Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-apiserver", "konnectivity"}}}}
	cases := map[string]struct {
		targets      v1alpha1.WorkloadTargets
		kind         v1alpha1.WorkloadKind
		ns, obj      map[string]string
		want, errors bool
	}{
		"empty targets select everything": {kind: v1alpha1.KindDaemonSet, want: true},
		"kind listed": {targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}},
			kind: v1alpha1.KindDeployment, want: true},
		"kind not listed": {targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}},
			kind: v1alpha1.KindStatefulSet},
		"namespace and object match": {targets: v1alpha1.WorkloadTargets{NamespaceSelector: tenant, Selector: cp},
			kind: v1alpha1.KindDeployment, ns: map[string]string{"tier": "tenant"}, obj: map[string]string{"component": "konnectivity"}, want: true},
		"namespace does not match": {targets: v1alpha1.WorkloadTargets{NamespaceSelector: tenant, Selector: cp},
			kind: v1alpha1.KindDeployment, ns: map[string]string{"tier": "infra"}, obj: map[string]string{"component": "konnectivity"}},
		"object does not match": {targets: v1alpha1.WorkloadTargets{NamespaceSelector: tenant, Selector: cp},
			kind: v1alpha1.KindDeployment, ns: map[string]string{"tier": "tenant"}, obj: map[string]string{"component": "etcd"}},
		"invalid selector is an error": {targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}},
			kind: v1alpha1.KindDeployment, errors: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := NewMatcher().Selects(tc.targets, tc.kind, tc.ns, tc.obj)
			if (err != nil) != tc.errors {
				t.Fatalf("error = %v, want error %v", err, tc.errors)
			}
			if got != tc.want {
				t.Errorf("Selects = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOutsideByNamespaceOnlyKnowsTheNameLabelIsFixed: a namespace selector that leaves a
// namespace out by a requirement on kubernetes.io/metadata.name leaves it out whatever a
// relabel does (the API server sets the label to the name), so the cache's labels cannot
// lag there; a requirement on any other label can, even beside a name requirement that
// passes.
func TestOutsideByNamespaceOnlyKnowsTheNameLabelIsFixed(t *testing.T) {
	m := NewMatcher()
	obj := map[string]string{"app": "kube-apiserver"}
	sel := &metav1.LabelSelector{MatchLabels: obj}
	ns := map[string]string{corev1.LabelMetadataName: "tenant-a"}
	name := func(op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: op, Values: values}
	}
	for _, tc := range []struct {
		name  string
		nsSel *metav1.LabelSelector
		want  bool
	}{
		{"another tenant by matchLabels", &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "tenant-b"}}, false},
		{"other tenants by In", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{name(metav1.LabelSelectorOpIn, "tenant-b", "tenant-c")}}, false},
		{"this tenant by NotIn", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{name(metav1.LabelSelectorOpNotIn, "tenant-a")}}, false},
		{"no name label, which every namespace has", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{name(metav1.LabelSelectorOpDoesNotExist)}}, false},
		{"a label a relabel may add", &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, true},
		{"a label beside a name requirement that passes", &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"},
			MatchExpressions: []metav1.LabelSelectorRequirement{name(metav1.LabelSelectorOpIn, "tenant-a", "tenant-b")}}, true},
		{"a label beside the name label Exists", &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"},
			MatchExpressions: []metav1.LabelSelectorRequirement{name(metav1.LabelSelectorOpExists)}}, true},
		{"selected already", &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "tenant-a"}}, false},
	} {
		if got := m.OutsideByNamespaceOnly(tc.nsSel, sel, "tenant-a", ns, obj); got != tc.want {
			t.Errorf("%s: OutsideByNamespaceOnly = %t, want %t", tc.name, got, tc.want)
		}
	}
	if m.OutsideByNamespaceOnly(&metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, sel, "tenant-a", ns, map[string]string{"app": "other"}) {
		t.Error("an object the selector does not match is outside by its own labels too")
	}
}
