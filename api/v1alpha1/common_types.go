package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says what holdfast does with a violation of a policy.
// +kubebuilder:validation:Enum=Enforce;Warn;Audit
type Mode string

const (
	// ModeEnforce rejects the request.
	ModeEnforce Mode = "Enforce"
	// ModeWarn admits the request and returns the violation as an admission warning.
	ModeWarn Mode = "Warn"
	// ModeAudit admits the request and records the violation in the audit annotations.
	ModeAudit Mode = "Audit"
)

// WorkloadKind names an apps/v1 workload kind a policy can guard.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
type WorkloadKind string

const (
	KindDeployment  WorkloadKind = "Deployment"
	KindStatefulSet WorkloadKind = "StatefulSet"
	KindDaemonSet   WorkloadKind = "DaemonSet"
)

// WorkloadTargets selects the workloads a policy applies to. A policy applies to an
// update when it selects the old or the new object, so relabelling cannot move a
// change out of its reach.
type WorkloadTargets struct {
	// kinds limits the policy to these workload kinds; empty means all three.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	Kinds []WorkloadKind `json:"kinds,omitempty"`

	// namespaceSelector selects the namespaces by their labels; unset means every namespace.
	// Use the kubernetes.io/metadata.name label to select namespaces by name.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="each matchExpressions entry needs the operator In or NotIn with values, or Exists or DoesNotExist without"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// selector selects workloads by their own labels; unset means every workload.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="each matchExpressions entry needs the operator In or NotIn with values, or Exists or DoesNotExist without"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Exemptions lists requesters a policy never applies to, for break-glass and
// for controllers such as an HPA that must be able to act alone.
type Exemptions struct {
	// users are exempt user names, as the API server authenticates them.
	// +optional
	// +listType=set
	Users []string `json:"users,omitempty"`

	// groups are exempt groups; a requester in any of them is exempt.
	// +optional
	// +listType=set
	Groups []string `json:"groups,omitempty"`

	// serviceAccounts are exempt service accounts, each written namespace/name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
}
