package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

	// rules are the checks applied to the selected workloads.
	Rules RolloutRules `json:"rules"`
}

// RolloutRules are the checks of a RolloutPolicy.
// +kubebuilder:validation:XValidation:rule="has(self.settle) || has(self.minInterval) || has(self.revertWindow) || has(self.strategy) || has(self.concurrency) || has(self.sharedBudget) || (has(self.argsMatchReplicas) && size(self.argsMatchReplicas) > 0)",message="rules must enable at least one of settle, minInterval, revertWindow, argsMatchReplicas, strategy, concurrency, sharedBudget"
type RolloutRules struct {
	// settle keeps one rollout at a time (I1): a request that starts rolling out a new
	// revision (a template change, a resume, a switch from OnDelete to RollingUpdate, a
	// partition lowered below the replicas, a re-create adopting what a deleted workload of
	// its name left) is denied while the current revision's rollout is unfinished. Finished
	// (every pod of the current revision available, no pod of another left) is sticky: a pod
	// lost later is a health problem, not a rollout. Allowed nevertheless: a cancel (back to
	// the revision the current one replaced, which still has pods) and the fix of a stalled
	// rollout (ProgressDeadlineExceeded under a progressDeadlineSeconds no shorter than
	// stallAfter, or no more available pods for stallAfter). A template edited while paused
	// or OnDelete is staged: its rollout starts, and is checked, when the hold is lifted.
	// +optional
	Settle *SettleRule `json:"settle,omitempty"`

	// minInterval (I2) denies a new revision sooner than this after the current one became
	// current, e.g. "2m", as holdfast's revision journal recorded it. A cancel of an
	// unfinished rollout, and a return within revertWindow, are not new revisions.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	MinInterval *metav1.Duration `json:"minInterval,omitempty"`

	// revertWindow (I3) limits returns: a change back to a pod template that stopped being
	// current less than this long ago (A→B→A). One return per window is admitted, and only
	// while the rollout it cancels is unfinished or stalled; after a finished rollout, the
	// way out of a bad release inside the window is forward, to a new template (after
	// minInterval), or an exempt requester.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	RevertWindow *metav1.Duration `json:"revertWindow,omitempty"`

	// strategy lints the shape of a workload's rollout strategy and pods, on create and
	// on every update that introduces a new finding (an update that leaves an existing
	// finding as it was is not held up by it).
	// +optional
	Strategy *StrategyRule `json:"strategy,omitempty"`

	// argsMatchReplicas lists container flags whose value must equal spec.replicas,
	// such as konnectivity-server's --server-count. Applies to Deployments and
	// StatefulSets that have the named container. A change whose only template difference
	// is such a flag, following a replicas change, is a scale: no revision rule applies to it,
	// in either direction, whichever policy holds which rule (I4). A request to the scale
	// subresource cannot change the flag, so it is
	// denied whenever it changes replicas; on an HPA-scaled workload, exempt the HPA.
	// +optional
	// +listType=map
	// +listMapKey=container
	// +listMapKey=flag
	// +kubebuilder:validation:MaxItems=16
	ArgsMatchReplicas []ArgMatchesReplicas `json:"argsMatchReplicas,omitempty"`

	// concurrency limits how many of the selected workloads roll out at once, across the
	// fleet: one operator change or one image rebuild then reaches every tenant a few at a
	// time instead of all in the same minute.
	// +optional
	Concurrency *ConcurrencyRule `json:"concurrency,omitempty"`

	// sharedBudget makes a workload's rollouts and its pods' evictions share one budget,
	// that of the named DisruptionPolicy, so that a drain and a rollout never take the same
	// agents down together (a rollout ignores PodDisruptionBudgets): a start is refused while
	// the workload's evictions under that policy are in flight or in its cooldown, and an
	// eviction of its pods is deferred (429) while its rollout is in flight, until the
	// rollout finishes or stalls. A rollback, the fix of a stalled rollout and a CREATE are
	// never refused by it.
	// +optional
	SharedBudget *SharedBudget `json:"sharedBudget,omitempty"`
}

// SharedBudget names the DisruptionPolicy whose budget a RolloutPolicy's rollouts share.
type SharedBudget struct {
	// disruptionPolicy is the DisruptionPolicy's name. It shares the budget of the
	// workloads both policies select.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DisruptionPolicy string `json:"disruptionPolicy"`
}

// ConcurrencyRule is a fleet-wide limit on rollouts in flight.
type ConcurrencyRule struct {
	// maxInFlight is how many other selected workloads may have an unfinished rollout (by
	// settle's definition of finished) when one starts a new revision: a number, or a
	// percentage of the selected workloads that have served (had an available pod), rounded
	// up, at least 1 and at most maxInFlightCap. A start beyond it is refused (403), naming
	// the workloads in flight. A CREATE of fresh pods is never refused by it; a re-create that adopts a deleted workload's pods with another template is a start. A workload that has never
	// served holds no slot (it has nothing to disrupt, and a tenant's never-Ready dummies
	// must not capture the fleet). A cancel (rollback to the revision still serving) and
	// the fix of a stalled rollout are never held by it. A stalled rollout keeps its slot
	// for stalledSlotLifetime, so that a failing release stops spreading once maxInFlight
	// workloads have stalled, like a circuit breaker; its rollback or fix frees the slot
	// when it finishes. A paused or OnDelete workload is not in flight, but for a held
	// StatefulSet grown over its staged template: kube creates the new ordinals from it at
	// once, so that scale is a start, and holds a slot while those pods come up (until 2
	// minutes after the last became available).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[0-9]+%$')",message="must be a positive number of workloads or a percentage such as 10%"
	MaxInFlight intstr.IntOrString `json:"maxInFlight"`

	// maxInFlightCap is the most a percentage maxInFlight resolves to, whatever the number
	// of selected workloads: workloads created to raise the count cannot raise the limit
	// past it. Unset: no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxInFlightCap *int32 `json:"maxInFlightCap,omitempty"`

	// maxInFlightPerNamespace is how many workloads of one namespace may be in flight at
	// once: a start is refused while that many others of its namespace are, so that one
	// tenant's rollouts (or stalled releases) cannot hold every slot of the fleet. Unset:
	// only maxInFlight.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxInFlightPerNamespace *int32 `json:"maxInFlightPerNamespace,omitempty"`

	// stalledSlotLifetime is how long a stalled rollout keeps its slot after it stalled
	// (settle.stallAfter without progress): after it, the rollout no longer counts as in
	// flight, and a Warning Event (StalledSlotReleased) on the workload says so. "0s"
	// keeps the slot until the rollout is fixed or rolled back.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	StalledSlotLifetime *metav1.Duration `json:"stalledSlotLifetime,omitempty"`
}

// StrategyRule lists the shape requirements of guarded workloads; unset fields check nothing.
type StrategyRule struct {
	// maxUnavailable is the largest rolling-update maxUnavailable allowed, as a number of
	// pods or a percentage; both sides are resolved against the replica count (or
	// desiredNumberScheduled) the way kube rounds maxUnavailable, down.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative number of pods or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// minReadySeconds is the least spec.minReadySeconds allowed: how long a new pod must
	// be Ready before the rollout moves on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// daemonSetSurge requires DaemonSets to roll with maxSurge of at least one pod and
	// maxUnavailable 0, so that each node's replacement agent runs before the old one stops.
	// +optional
	DaemonSetSurge bool `json:"daemonSetSurge,omitempty"`

	// readinessProbe requires every container to have a readiness probe.
	// +optional
	ReadinessProbe bool `json:"readinessProbe,omitempty"`

	// minTerminationGracePeriodSeconds is the least terminationGracePeriodSeconds allowed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinTerminationGracePeriodSeconds *int64 `json:"minTerminationGracePeriodSeconds,omitempty"`

	// preStop requires every container to have a preStop hook, so that it can drain
	// connections before it is sent SIGTERM.
	// +optional
	PreStop bool `json:"preStop,omitempty"`

	// antiAffinityTopologyKey requires a required pod anti-affinity term on this
	// topology key (e.g. kubernetes.io/hostname) that selects the workload's own pods.
	// +optional
	// +kubebuilder:validation:MaxLength=316
	AntiAffinityTopologyKey string `json:"antiAffinityTopologyKey,omitempty"`

	// maxNoExecuteTolerationSeconds requires Deployments to tolerate the
	// node.kubernetes.io/not-ready and node.kubernetes.io/unreachable NoExecute taints
	// for a bounded time no longer than this: agents run as Deployments must leave a
	// failed node, but not at the first blip. DaemonSets tolerate these taints forever by design.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxNoExecuteTolerationSeconds *int64 `json:"maxNoExecuteTolerationSeconds,omitempty"`
}

// SettleRule configures the settle rule.
type SettleRule struct {
	// stallAfter is how long a rollout may go without more of the current revision's pods
	// available before holdfast treats it as stalled and lets a fix through. The clock
	// stops while the rollout is held (paused, OnDelete, a partition), so holding a rollout
	// never stalls it. StatefulSets and DaemonSets have no progress deadline; this is theirs.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h)){1,4}$`
	StallAfter *metav1.Duration `json:"stallAfter,omitempty"`
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

// RolloutPolicyStatus is what holdfast last observed of a RolloutPolicy. Decision counts
// are in metrics (holdfast_rollout_requests_total and its kin), not here.
type RolloutPolicyStatus struct {
	// observedGeneration is the policy generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// The policy's windows and temporary exemptions, as of the last reconcile.
	WindowStatus `json:",inline"`

	// workloadsMatched counts the Deployments, StatefulSets and DaemonSets the policy selects.
	// +optional
	WorkloadsMatched int32 `json:"workloadsMatched"`

	// violations counts the selected workloads that, as they stand, break the rules that
	// need no request (argsMatchReplicas, strategy): what the policy would refuse were they
	// created now. The leader's background audit counts them on every policy change and
	// periodically; in Audit and Warn mode each gets a PolicyViolation Event.
	// +optional
	Violations *int32 `json:"violations,omitempty"`

	// inFlight counts the selected workloads whose rollouts are unfinished, as the revision
	// journals last recorded them; set when rules.concurrency is.
	// +optional
	InFlight *int32 `json:"inFlight,omitempty"`

	// inFlightWorkloads names them, kind namespace/name, at most 20; stalled ones end in
	// " (stalled)": they hold their slot until rolled back or fixed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	InFlightWorkloads []string `json:"inFlightWorkloads,omitempty"`

	// conditions: Ready is True when the policy is valid and in force, False with reason
	// InvalidSelector (the policy then selects nothing until fixed),
	// InvalidWindow (the windows it cannot evaluate are ignored) or Suspended.
	// WritersFighting (set when rules.revertWindow is) is True while two field managers
	// alternate the templates of a selected workload within the revert window, naming the
	// workload and both writers.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of holdfast's policies.
const (
	ConditionReady        = "Ready"
	ReasonValid           = "Valid"
	ReasonInvalidSelector = "InvalidSelector"
	ReasonInvalidWindow   = "InvalidWindow"
	ReasonSuspended       = "Suspended"
	// ConditionPDBConflict is True while a selected workload gets no generated PDB.
	ConditionPDBConflict = "PDBConflict"
	ReasonNoConflict     = "NoConflict"
	ReasonConflict       = "Conflict"
	// ConditionFloorWeakened is True while another PDB, weaker than the policy, covers the
	// pods of a selected workload (the generator steps back: kube refuses evictions of a pod
	// two PDBs cover), so that PDB is the floor while holdfast is down.
	ConditionFloorWeakened = "FloorWeakened"
	ReasonFloorHeld        = "FloorHeld"
	ReasonWeakerPDB        = "WeakerPDB"
	// ConditionIntercepted says whether the API server sends the requests the policy
	// guards to holdfast: True (reason Scoped), False when the policy is suspended
	// (NotGuarding), its selectors cannot be evaluated (InvalidSelector: it selects
	// nothing) or holdfast could not update its webhook configuration (UpdateFailed: the
	// previous configuration stays in force). Earlier releases set Broadened where
	// InvalidSelector is set now.
	ConditionIntercepted = "Intercepted"
	ReasonScoped         = "Scoped"
	// ReasonBroadened is no longer set: see ConditionIntercepted.
	ReasonBroadened    = "Broadened"
	ReasonNotGuarding  = "NotGuarding"
	ReasonUpdateFailed = "UpdateFailed"
	// ConditionWritersFighting is True while two writers (field managers) alternate the
	// templates of a selected workload within the policy's revertWindow: one changed the
	// template and another changed it again. It names the workload and both writers; a
	// policy without a revertWindow has no such condition.
	ConditionWritersFighting = "WritersFighting"
	ReasonAlternating        = "Alternating"
	ReasonOneWriter          = "OneWriter"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rp,categories=holdfast
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Workloads",type=integer,JSONPath=`.status.workloadsMatched`
// +kubebuilder:printcolumn:name="In-Flight",type=integer,JSONPath=`.status.inFlight`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.violations`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
// +kubebuilder:printcolumn:name="Active-Window",type=string,JSONPath=`.status.activeWindow`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// RolloutPolicy guards Deployments, StatefulSets and DaemonSets against pod-template
// changes that would cause unstable multi-revision rollouts.
type RolloutPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired behaviour of the policy.
	Spec RolloutPolicySpec `json:"spec"`

	// status is what holdfast last observed of the policy.
	// +optional
	Status RolloutPolicyStatus `json:"status,omitempty"`
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
