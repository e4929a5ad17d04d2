// Package testing has object builders for holdfast's tests, in the style of kueue's
// pkg/util/testing wrappers: start from a sensible object, change only what the test is about.
package testing

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// DeploymentWrapper builds a Deployment.
type DeploymentWrapper struct{ appsv1.Deployment }

// MakeDeployment returns a one-replica Deployment with one container named "main".
func MakeDeployment(namespace, name string) *DeploymentWrapper {
	labels := map[string]string{"app": name}
	return &DeploymentWrapper{appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/main:1"}}},
			},
		},
	}}
}

// Obj returns the built Deployment.
func (w *DeploymentWrapper) Obj() *appsv1.Deployment { return &w.Deployment }

// Replicas sets spec.replicas.
func (w *DeploymentWrapper) Replicas(n int32) *DeploymentWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// Label sets a label on the Deployment itself (not its pods).
func (w *DeploymentWrapper) Label(k, v string) *DeploymentWrapper {
	w.Labels[k] = v
	return w
}

// Container adds a container running args.
func (w *DeploymentWrapper) Container(name string, args ...string) *DeploymentWrapper {
	w.Spec.Template.Spec.Containers = append(w.Spec.Template.Spec.Containers,
		corev1.Container{Name: name, Image: "registry.example/" + name + ":1", Args: args})
	return w
}

// NodeSelector pins the pods to nodes with this label.
func (w *DeploymentWrapper) NodeSelector(k, v string) *DeploymentWrapper {
	w.Spec.Template.Spec.NodeSelector = map[string]string{k: v}
	return w
}

// Toleration lets the pods run on nodes with this taint key.
func (w *DeploymentWrapper) Toleration(key string) *DeploymentWrapper {
	w.Spec.Template.Spec.Tolerations = append(w.Spec.Template.Spec.Tolerations,
		corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	return w
}

// RolloutPolicyWrapper builds a RolloutPolicy.
type RolloutPolicyWrapper struct{ v1alpha1.RolloutPolicy }

// MakeRolloutPolicy returns an enforcing policy with no rules and no targets.
func MakeRolloutPolicy(name string) *RolloutPolicyWrapper {
	return &RolloutPolicyWrapper{v1alpha1.RolloutPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RolloutPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RolloutPolicySpec{Mode: v1alpha1.ModeEnforce},
	}}
}

// Obj returns the built policy.
func (w *RolloutPolicyWrapper) Obj() *v1alpha1.RolloutPolicy { return &w.RolloutPolicy }

// Mode sets spec.mode.
func (w *RolloutPolicyWrapper) Mode(m v1alpha1.Mode) *RolloutPolicyWrapper {
	w.Spec.Mode = m
	return w
}

// Kinds limits the policy to these kinds.
func (w *RolloutPolicyWrapper) Kinds(k ...v1alpha1.WorkloadKind) *RolloutPolicyWrapper {
	w.Spec.Targets.Kinds = k
	return w
}

// Selector selects workloads with these labels.
func (w *RolloutPolicyWrapper) Selector(matchLabels map[string]string) *RolloutPolicyWrapper {
	w.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: matchLabels}
	return w
}

// NamespaceSelector selects namespaces with these labels.
func (w *RolloutPolicyWrapper) NamespaceSelector(matchLabels map[string]string) *RolloutPolicyWrapper {
	w.Spec.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: matchLabels}
	return w
}

// ArgMatchesReplicas adds an argsMatchReplicas rule.
func (w *RolloutPolicyWrapper) ArgMatchesReplicas(container, flag string) *RolloutPolicyWrapper {
	w.Spec.Rules.ArgsMatchReplicas = append(w.Spec.Rules.ArgsMatchReplicas,
		v1alpha1.ArgMatchesReplicas{Container: container, Flag: flag})
	return w
}

// ExemptServiceAccounts exempts these service accounts, each namespace/name.
func (w *RolloutPolicyWrapper) ExemptServiceAccounts(sa ...string) *RolloutPolicyWrapper {
	w.Spec.Exemptions.ServiceAccounts = sa
	return w
}

// Suspend suspends the policy.
func (w *RolloutPolicyWrapper) Suspend() *RolloutPolicyWrapper {
	w.Spec.Suspend = true
	return w
}

// Clone returns an independent copy to build on.
func (w *RolloutPolicyWrapper) Clone() *RolloutPolicyWrapper {
	return &RolloutPolicyWrapper{*w.DeepCopy()}
}
