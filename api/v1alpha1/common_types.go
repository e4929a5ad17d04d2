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

// FailurePolicy is what the API server does with a request holdfast's webhook does not
// answer (holdfast is down, unreachable or slow).
// +kubebuilder:validation:Enum=Fail;Ignore
type FailurePolicy string

const (
	// FailurePolicyFail refuses the request: nothing the policy guards changes unchecked.
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore admits the request unchecked: holdfast's outage blocks nothing.
	FailurePolicyIgnore FailurePolicy = "Ignore"
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
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(self.matchLabels[k]).hasValue())",fieldPath=".matchLabels",message="label keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !format.qualifiedName().validate(e.key).hasValue() && (!has(e.values) || e.values.all(v, !format.labelValue().validate(v).hasValue())))",fieldPath=".matchExpressions",message="keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// selector selects workloads by their own labels; unset means every workload.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="each matchExpressions entry needs the operator In or NotIn with values, or Exists or DoesNotExist without"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(self.matchLabels[k]).hasValue())",fieldPath=".matchLabels",message="label keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !format.qualifiedName().validate(e.key).hasValue() && (!has(e.values) || e.values.all(v, !format.labelValue().validate(v).hasValue())))",fieldPath=".matchExpressions",message="keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
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

	// temporary are exemptions that expire, each with its reason on record.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Temporary []TemporaryExemption `json:"temporary,omitempty"`
}

// WindowAction is what a window does to the changes a policy guards.
// +kubebuilder:validation:Enum=Deny;Allow
type WindowAction string

const (
	// WindowDeny refuses new rollouts and defers evictions while the window is open.
	WindowDeny WindowAction = "Deny"
	// WindowAllow lets changes through only while a window is open.
	WindowAllow WindowAction = "Allow"
)

// Window is a recurring period, opening at each time of a cron schedule and lasting
// duration, during which a policy denies changes (Deny), or outside of which it denies
// them (Allow, when the policy has any). Rollbacks and fixes of stalled rollouts, scales,
// and evictions of pods that serve nothing pass in every window.
type Window struct {
	// name identifies the window in messages and status; defaults to its schedule.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// schedule is a standard five-field cron expression ("0 9 * * 1-5": weekdays at 09:00)
	// in timeZone.
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`

	// duration is how long the window stays open from each time of the schedule, e.g. "2h":
	// elapsed time, so a window that spans a daylight-saving change ends an hour earlier or
	// later on the clock.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	Duration metav1.Duration `json:"duration"`

	// timeZone is an IANA time zone such as Europe/Berlin; UTC when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`

	// action is Deny or Allow.
	Action WindowAction `json:"action"`
}

// TemporaryExemption exempts requesters until a time, with the reason on record.
type TemporaryExemption struct {
	// users, groups and serviceAccounts are as in exemptions.
	// +optional
	// +listType=set
	Users []string `json:"users,omitempty"`
	// +optional
	// +listType=set
	Groups []string `json:"groups,omitempty"`
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`

	// expires is when the exemption stops applying.
	Expires metav1.Time `json:"expires"`

	// reason is why it was granted, e.g. the incident or change ticket; it is named in the
	// Event and audit annotation of every admission it lets through.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason"`
}

// WindowStatus is what a policy's windows say now.
type WindowStatus struct {
	// activeWindow names the window in force now: a Deny window that is open, or an Allow
	// window that is open; "outside Allow windows" when the policy has Allow windows and
	// none is open; empty when changes are not held by a window.
	// +optional
	ActiveWindow string `json:"activeWindow,omitempty"`

	// nextChange is when what the windows say next changes.
	// +optional
	NextChange *metav1.Time `json:"nextChange,omitempty"`

	// expiredExemptions names the temporary exemptions that no longer apply, by reason.
	// +optional
	// +listType=set
	ExpiredExemptions []string `json:"expiredExemptions,omitempty"`
}
