package policy

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
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
