package workload

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func tmpl(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

func TestSameTemplateIgnoresHashLabels(t *testing.T) {
	a, b := tmpl("x"), tmpl("x")
	b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"
	if !SameSpec(&a, &b) {
		t.Error("templates differing only in pod-template-hash must compare equal")
	}
	c := tmpl("y")
	if SameSpec(&a, &c) {
		t.Error("templates with different images must differ")
	}
	if b.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "abc" {
		t.Error("SameSpec must not modify its arguments")
	}
}
