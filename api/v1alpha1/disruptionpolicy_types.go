package v1alpha1

import (
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PodTargets selects the pods a DisruptionPolicy guards.
type PodTargets struct {
	// namespaceSelector selects the namespaces by their labels; unset means every namespace.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="each matchExpressions entry needs the operator In or NotIn with values, or Exists or DoesNotExist without"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(self.matchLabels[k]).hasValue())",fieldPath=".matchLabels",message="label keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !format.qualifiedName().validate(e.key).hasValue() && (!has(e.values) || e.values.all(v, !format.labelValue().validate(v).hasValue())))",fieldPath=".matchExpressions",message="keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// selector selects pods by their labels; unset means every pod in the selected namespaces.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && ((e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))",message="each matchExpressions entry needs the operator In or NotIn with values, or Exists or DoesNotExist without"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, !format.qualifiedName().validate(k).hasValue() && !format.labelValue().validate(self.matchLabels[k]).hasValue())",fieldPath=".matchLabels",message="label keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !format.qualifiedName().validate(e.key).hasValue() && (!has(e.values) || e.values.all(v, !format.labelValue().validate(v).hasValue())))",fieldPath=".matchExpressions",message="keys must be qualified names (an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric) and values label values (the same, or empty)"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// DisruptionPolicySpec is which pods a DisruptionPolicy guards against evictions, and how.
// +kubebuilder:validation:XValidation:rule="!has(self.afterMaxHold) || self.afterMaxHold != 'Release' || has(self.maxHold)",fieldPath=".afterMaxHold",message="afterMaxHold Release needs maxHold: it says after how long a hold is released"
type DisruptionPolicySpec struct {
	// targets selects the guarded pods. Budgets are kept per group: the pods of one
	// controller (a Deployment through its ReplicaSets, a StatefulSet, a DaemonSet).
	// Pods of other owners are not guarded.
	Targets PodTargets `json:"targets"`

	// mode is what a violation does: Enforce defers the eviction (429) or refuses it
	// (403, when the budget is zero), Warn admits it with a warning, Audit admits it and
	// records the violation in the audit annotations.
	// +kubebuilder:default=Enforce
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// exemptions lists requesters the policy never applies to.
	// +optional
	Exemptions Exemptions `json:"exemptions,omitempty"`

	// suspend turns the policy off without deleting it.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// failurePolicy is what the API server does with the requests this policy guards when
	// holdfast does not answer: Fail refuses them, Ignore admits them unchecked. Unset takes
	// holdfast's default (the chart's webhook.*.failurePolicy). Requests no policy selects
	// are never sent to holdfast, whatever this says.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// windows hold changes by the clock: during a Deny window, or outside every Allow window
	// when there are any, new rollouts are refused and evictions deferred.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Windows []Window `json:"windows,omitempty"`

	// maxUnavailable is how many pods of a group may be unavailable at once, as a number
	// or a percentage of the group's expected count (spec.replicas, or a DaemonSet's
	// desiredNumberScheduled), rounded up as PodDisruptionBudgets round. A percentage is
	// at most 100% (holdfast's policy webhook refuses more: kube refuses such a PDB, and
	// the generated floor could never be kept).
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative number of pods or a percentage such as 25%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// minReadySeconds is how long a pod must have been Ready to count as available: a
	// replacement that just became Ready has not settled yet. When it is set, holdfast
	// adds a margin of 5 s for the clocks of nodes and replicas to differ by.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// cooldown is the least time between two evictions of Ready pods admitted in one group,
	// e.g. "20s"; evicting a pod that is not Ready neither waits for it nor restarts it
	// under AlwaysAllow. holdfast keeps its records of evictions as long as the longest
	// cooldown needs.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`

	// unhealthyPodEvictionPolicy says when a pod that is not Ready may be evicted, as in a
	// PodDisruptionBudget: AlwaysAllow (default) lets it go at once; IfHealthyBudget only
	// while the group is within its budget.
	// +kubebuilder:default=AlwaysAllow
	// +kubebuilder:validation:Enum=IfHealthyBudget;AlwaysAllow
	// +optional
	UnhealthyPodEvictionPolicy *policyv1.UnhealthyPodEvictionPolicyType `json:"unhealthyPodEvictionPolicy,omitempty"`

	// pdb makes holdfast keep a PodDisruptionBudget under every workload whose pods the
	// policy selects: the floor that still holds when holdfast's webhook is down.
	// +optional
	PDB *PDBGeneration `json:"pdb,omitempty"`

	// requesters tighten the budget for the identities they name: the first entry that
	// matches the evicting user takes its maxUnavailable and cooldown where they are
	// stricter than the policy's (it never loosens them). maxUnavailable 0 means this
	// requester never evicts the selected pods (403), e.g. cluster-autoscaler's service
	// account beside a human's one-at-a-time drain.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Requesters []Requester `json:"requesters,omitempty"`

	// guardDeletes extends the policy to DELETEs of the pods it selects (kubectl delete pod,
	// kubectl drain --disable-eviction): a delete of a Ready pod is held by the same budget,
	// cooldown, windows and requester entries as its eviction, and once admitted counts as
	// one (one budget, both ways). A refusal is 429 without Retry-After (403 when the budget
	// is zero) and says to evict instead. Never held, and most never sent to holdfast: deletes
	// of pods terminating, terminal, Pending or not Ready, or on a NotReady node; deletes by
	// the kubelet, kube's controllers, the scheduler, holdfast and the identities holdfast
	// is told never to hold (Karpenter's), and by the policy's exemptions. The entry that
	// sends deletes fails open unless failurePolicy says Fail, which refuses every guarded
	// delete while holdfast does not answer.
	// +optional
	GuardDeletes bool `json:"guardDeletes,omitempty"`

	// maxHold is how long this policy may defer a pod's eviction without a break before
	// holdfast warns (a Warning Event on the pod and its node, holdfast_eviction_held_seconds),
	// so that operators act before a platform forces the drain. Each policy's hold is its
	// own: the time another policy held the pod does not count. What happens after it is
	// afterMaxHold's.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	MaxHold *metav1.Duration `json:"maxHold,omitempty"`

	// afterMaxHold is what holdfast does once a pod's eviction has been deferred without a
	// break for maxHold: Hold (unset) keeps deferring it, and warns; Release lets holdfast's
	// own holds on that pod go (windows, cooldowns, minReadySeconds, requester entries and a
	// rollout sharing the budget), so that the eviction is judged by the budget as kube's
	// PodDisruptionBudget judges it: maxUnavailable over the pods that are Ready. The
	// generated PDB has the same budget, so a release never takes more pods down than the
	// floor allows. A released eviction is recorded as such (rule maxHold).
	// +optional
	AfterMaxHold AfterMaxHold `json:"afterMaxHold,omitempty"`

	// topologyBudget limits how many topology domains (zones, by default) may have
	// disrupted pods of a group at once: the eviction, or guarded delete, of a Ready pod in
	// another domain waits while that many domains have pods holdfast admitted down whose
	// replacements are not available yet. A domain is whole again once it has as many of
	// the group's pods available as served there when the pod was taken down (a pod
	// re-created in another domain, or for another reason, does not make it whole), or once
	// the whole group is available again, or after replacementTimeout. Unset, a group's
	// disruptions may span any domains.
	// +optional
	TopologyBudget *TopologyBudget `json:"topologyBudget,omitempty"`
}

// TopologyBudget is a budget of topology domains with disrupted pods, per group.
type TopologyBudget struct {
	// key is the node label whose values are the domains, e.g. topology.kubernetes.io/zone.
	// A pod's domain is its node's value. Pods on nodes without the label, or with it
	// empty, are in no domain: they are not limited by the topology budget (maxUnavailable
	// still applies), and their disruptions hold no domain. A key no node carries with a
	// value makes the policy Ready=False. Changed (or the budget added) while a drain runs,
	// each pod taken down before, whose domain of the new key was not read, counts as a
	// domain of its own until the group is whole again or replacementTimeout passes.
	// +kubebuilder:default="topology.kubernetes.io/zone"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a label key: an optional DNS subdomain prefix and a slash, then at most 63 alphanumerics, dashes, underscores or dots, starting and ending with an alphanumeric"
	// +optional
	Key string `json:"key,omitempty"`

	// maxDisruptedDomains is how many domains may have disrupted pods of a group at once.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxDisruptedDomains int32 `json:"maxDisruptedDomains,omitempty"`

	// replacementTimeout bounds how long one admitted disruption holds its domain while its
	// replacement is not available (a replacement that cannot be scheduled must not hold
	// every other domain for ever): after it, the domain frees. Default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	ReplacementTimeout *metav1.Duration `json:"replacementTimeout,omitempty"`
}

// AfterMaxHold is what holdfast does with a hold that has lasted maxHold.
// +kubebuilder:validation:Enum=Hold;Release
type AfterMaxHold string

const (
	// AfterMaxHoldHold keeps deferring the eviction, with warnings: maxHold only warns.
	AfterMaxHoldHold AfterMaxHold = "Hold"
	// AfterMaxHoldRelease lets holdfast's own holds on the pod go; the budget stays.
	AfterMaxHoldRelease AfterMaxHold = "Release"
)

// PDBGeneration configures the PodDisruptionBudgets holdfast generates.
type PDBGeneration struct {
	// generate turns generation on.
	Generate bool `json:"generate"`

	// minReplicas is the least expected pod count of a workload that gets a PDB: a
	// one-replica workload under a budget of one could never be drained.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
}

// DisruptionPolicyStatus is what holdfast last observed of a DisruptionPolicy. Eviction
// counts are in metrics (holdfast_eviction_requests_total and its kin), not here.
type DisruptionPolicyStatus struct {
	// observedGeneration is the policy generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// The policy's windows and temporary exemptions, as of the last reconcile.
	WindowStatus `json:",inline"`

	// workloadsSelected counts the Deployments, StatefulSets and DaemonSets whose pods the
	// policy selects; set when pdb.generate is on.
	// +optional
	WorkloadsSelected int32 `json:"workloadsSelected,omitempty"`

	// pdbsManaged counts the PodDisruptionBudgets holdfast keeps for this policy.
	// +optional
	PDBsManaged int32 `json:"pdbsManaged,omitempty"`

	// conflicts counts selected workloads that get no PDB because another PDB already
	// covers their pods, or their selector would cover another workload's pods.
	// +optional
	Conflicts int32 `json:"conflicts,omitempty"`

	// conditions: Ready is True when the policy is valid and in force; PDBConflict is True
	// while some selected workload gets no PDB because of a conflict; FloorWeakened is True
	// while another PDB that allows more disruptions than the policy covers the pods of
	// some selected workload (that PDB is then the floor while holdfast is down). Ready is
	// False (TopologyKeyMissing) while no node carries topologyBudget.key.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=dp,categories=holdfast
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Max Unavailable",type=string,JSONPath=`.spec.maxUnavailable`
// +kubebuilder:printcolumn:name="Cooldown",type=string,JSONPath=`.spec.cooldown`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="PDBs",type=integer,JSONPath=`.status.pdbsManaged`
// +kubebuilder:printcolumn:name="Conflicts",type=integer,JSONPath=`.status.conflicts`,priority=1
// +kubebuilder:printcolumn:name="Active-Window",type=string,JSONPath=`.status.activeWindow`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DisruptionPolicy paces evictions of the pods it selects: how many of a group may be
// unavailable at once, how long a replacement must be Ready first, and how long to
// wait between evictions.
type DisruptionPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired behaviour of the policy.
	Spec DisruptionPolicySpec `json:"spec"`

	// status is what holdfast last observed of the policy.
	// +optional
	Status DisruptionPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DisruptionPolicyList is a list of DisruptionPolicies.
type DisruptionPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DisruptionPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DisruptionPolicy{}, &DisruptionPolicyList{})
}

// Requester is a budget for some evicting identities.
type Requester struct {
	// users, groups and serviceAccounts (namespace/name) name the identities.
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

	// maxUnavailable is this requester's budget, a number or a percentage; 0 forbids.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%$`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// cooldown is this requester's least time between evictions.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`

	// deadline is when this requester stops waiting for a held eviction, as the drainer
	// behind it keeps time: holdfast warns on the pod and its node, with that time and the
	// time the budget frees, before a hold would outlast it. It changes no answer.
	// +optional
	Deadline *DrainDeadline `json:"deadline,omitempty"`
}

// DrainDeadline is a drainer's clock: when it forces an eviction holdfast defers, or gives up.
// +kubebuilder:validation:XValidation:rule="has(self.after) || (has(self.nodeClaim) && self.nodeClaim)",message="set after, nodeClaim, or both"
type DrainDeadline struct {
	// after is how long after its first deferred eviction of a pod the drainer stops
	// waiting: cluster-autoscaler gives up a scale-down after --max-pod-eviction-time (2m
	// by default); managed platforms force a drain after a fixed time (often 1h).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	After *metav1.Duration `json:"after,omitempty"`

	// nodeClaim reads Karpenter's deadline: the time in the annotation
	// karpenter.sh/nodeclaim-termination-timestamp of the NodeClaim of the pod's node, less
	// the pod's terminationGracePeriodSeconds, is when Karpenter deletes the pod whatever
	// holds it. The earlier of the two deadlines counts.
	// +optional
	NodeClaim bool `json:"nodeClaim,omitempty"`

	// then is what the drainer does at its deadline: Force deletes the pod (Karpenter, a
	// platform's force-drain), GiveUp abandons the drain (cluster-autoscaler).
	// +kubebuilder:validation:Enum=Force;GiveUp
	// +kubebuilder:default=Force
	// +optional
	Then DrainerAction `json:"then,omitempty"`
}

// DrainerAction is what a drainer does at its deadline.
type DrainerAction string

const (
	// DrainerForce deletes the pod without an eviction: no budget holds it then.
	DrainerForce DrainerAction = "Force"
	// DrainerGiveUp abandons the drain: the node stays, the pod too.
	DrainerGiveUp DrainerAction = "GiveUp"
)

// ReasonTopologyKeyMissing is a DisruptionPolicy's Ready=False while no node carries its
// topologyBudget.key: the budget then limits nothing, and says so.
const ReasonTopologyKeyMissing = "TopologyKeyMissing"

// DefaultTopologyKey, DefaultReplacementTimeout and the default of one domain are what an
// unset field of topologyBudget means.
const (
	DefaultTopologyKey        = "topology.kubernetes.io/zone"
	DefaultReplacementTimeout = 10 * time.Minute
)

// Resolved is the budget with its defaults filled in.
func (t TopologyBudget) Resolved() (key string, domains int, timeout time.Duration) {
	key, domains, timeout = t.Key, int(t.MaxDisruptedDomains), DefaultReplacementTimeout
	if key == "" {
		key = DefaultTopologyKey
	}
	if domains < 1 {
		domains = 1
	}
	if t.ReplacementTimeout != nil {
		timeout = t.ReplacementTimeout.Duration
	}
	return key, domains, timeout
}
