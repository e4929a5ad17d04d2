package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutPolicySpec is what a RolloutPolicy guards and how.
type RolloutPolicySpec struct {
	// targets selects the Deployments, StatefulSets and DaemonSets the policy guards.
	Targets WorkloadTargets `json:"targets"`

	// mode is what a violation does: Enforce rejects the request (403), Warn admits it
	// with an admission warning, Audit admits it and records the violation in the
	// request's audit annotations.
	// +kubebuilder:default=Enforce
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// exemptions lists requesters the policy never applies to.
	// +optional
	Exemptions Exemptions `json:"exemptions,omitempty"`

	// suspend turns the policy off without deleting it.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// rules are the checks applied to the selected workloads.
	Rules RolloutRules `json:"rules"`
}

// RolloutRules are the checks of a RolloutPolicy.
// +kubebuilder:validation:XValidation:rule="has(self.argsMatchReplicas) && size(self.argsMatchReplicas) > 0",message="rules must name at least one rule"
type RolloutRules struct {
	// argsMatchReplicas lists container flags whose value must equal spec.replicas,
	// such as konnectivity-server's --server-count. Applies to Deployments and
	// StatefulSets that have the named container.
	// +optional
	// +listType=map
	// +listMapKey=container
	// +listMapKey=flag
	// +kubebuilder:validation:MaxItems=16
	ArgsMatchReplicas []ArgMatchesReplicas `json:"argsMatchReplicas,omitempty"`
}

// ArgMatchesReplicas names one container flag that must carry the replica count.
type ArgMatchesReplicas struct {
	// container is the name of the container in the pod template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container"`

	// flag is the command-line flag, written with its dashes, e.g. --server-count.
	// Both "--flag=N" and "--flag N" are read.
	// +kubebuilder:validation:Pattern=`^--?[A-Za-z0-9][-A-Za-z0-9_.]*$`
	// +kubebuilder:validation:MaxLength=128
	Flag string `json:"flag"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=rp,categories=holdfast
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// RolloutPolicy guards Deployments, StatefulSets and DaemonSets against pod-template
// changes that would cause unstable multi-revision rollouts.
type RolloutPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired behaviour of the policy.
	Spec RolloutPolicySpec `json:"spec"`
}

// +kubebuilder:object:root=true

// RolloutPolicyList is a list of RolloutPolicies.
type RolloutPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RolloutPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RolloutPolicy{}, &RolloutPolicyList{})
}
