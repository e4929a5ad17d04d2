// Package v1alpha1 is version v1alpha1 of the Scenario file format that `holdfast
// simulate` reads: a cluster's nodes, a timeline of operator changes and node drains,
// and what the run is expected to show. It is a file format, not a resource any API
// server serves: its group, scenario.holdfast.dev, is its own, so that it is versioned
// apart from the policy API (holdfast.dev). Files written before it had a group of its
// own say holdfast.dev/v1alpha1, which is read as this version.
//
// No CRD is generated from it: it is not served.
// +kubebuilder:skip
package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1alpha1 "github.com/holdfast-dev/holdfast/api/v1alpha1"
)

var (
	// GroupVersion is the format's group and version.
	GroupVersion = schema.GroupVersion{Group: "scenario.holdfast.dev", Version: "v1alpha1"}
	// LegacyGroupVersion is the apiVersion scenarios were written with before the format
	// had a group of its own; a Scenario with it reads as this version.
	LegacyGroupVersion = policyv1alpha1.GroupVersion
)

// Kind is the kind of a Scenario document.
const Kind = "Scenario"

// The defaults of unset fields.
const (
	DefaultPodStartup    = time.Second
	DefaultUntil         = 30 * time.Minute
	DefaultBackoff       = 200 * time.Millisecond
	DefaultMaxBackoff    = 2 * time.Second
	DefaultRetryAfter    = 5 * time.Second
	DefaultClientRetries = 10
	DefaultOperator      = "operator"
	DefaultDrainUser     = "kubernetes-admin"
)

// Scenario is the document of a scenario file that holds its settings, timeline and
// expectations; the file's other documents are the objects the cluster starts with.
type Scenario struct {
	metav1.TypeMeta `json:",inline"`
	// metadata.name names the scenario in reports.
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScenarioSpec `json:"spec"`
}

// ScenarioSpec is a scenario's settings, timeline and expectations.
type ScenarioSpec struct {
	// description says what the scenario replays, in reports.
	Description string `json:"description,omitempty"`
	// nodes adds groups of nodes, besides the Node objects given.
	Nodes []NodeGroup `json:"nodes,omitempty"`
	// podStartup is how long a scheduled pod takes to become Ready (default 1s).
	PodStartup *metav1.Duration `json:"podStartup,omitempty"`
	// podTermination is how long a deleted or evicted pod takes to be gone (default: its
	// terminationGracePeriodSeconds, 30s unless set).
	PodTermination *metav1.Duration `json:"podTermination,omitempty"`
	// until ends the simulation at the latest (default 30m); it ends earlier once every
	// operator has what it wants, every drain is done and no pod is about to change.
	Until *metav1.Duration `json:"until,omitempty"`
	// timeline is what happens, at times from the start, in time order.
	Timeline []Step `json:"timeline"`
	// expect is what the run must show; `holdfast simulate` exits 1 naming each
	// expectation the run did not meet.
	Expect *Expectations `json:"expect,omitempty"`
}

// NodeGroup is count nodes named prefix-0, prefix-1, …
type NodeGroup struct {
	// prefix names the group's nodes.
	Prefix string `json:"prefix"`
	// count is how many nodes the group has.
	Count int `json:"count"`
	// labels are the nodes' labels (kubernetes.io/hostname is each node's name).
	Labels map[string]string `json:"labels,omitempty"`
	// unschedulable nodes are cordoned at the start.
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// Step is one thing that happens at At: exactly one of its operations.
type Step struct {
	// at is when, from the start.
	At metav1.Duration `json:"at"`
	// apply is an operator that wants a workload to have a spec from now on.
	Apply *Apply `json:"apply,omitempty"`
	// drain is a drain tool draining nodes.
	Drain *Drain `json:"drain,omitempty"`
	// cordon marks nodes unschedulable.
	Cordon *NodeList `json:"cordon,omitempty"`
	// uncordon marks nodes schedulable.
	Uncordon *NodeList `json:"uncordon,omitempty"`
}

// WorkloadRef names a workload.
type WorkloadRef struct {
	// kind is Deployment, StatefulSet or DaemonSet.
	Kind policyv1alpha1.WorkloadKind `json:"kind"`
	// namespace is the workload's namespace.
	Namespace string `json:"namespace"`
	// name is the workload's name.
	Name string `json:"name"`
}

// String is "Kind namespace/name", as reports name workloads.
func (r WorkloadRef) String() string { return string(r.Kind) + " " + r.Namespace + "/" + r.Name }

// Apply is an operator that wants the workload to have this spec from At on: it sends the
// change (a CREATE when the workload does not exist) and, refused, requeues with backoff
// until admitted or until a later Apply of the same workload changes what it wants.
type Apply struct {
	// workload is the workload the operator drives.
	Workload WorkloadRef `json:"workload"`
	// template is the pod template it wants; unset keeps the workload's.
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`
	// replicas it wants (Deployments and StatefulSets); unset keeps the workload's.
	Replicas *int32 `json:"replicas,omitempty"`
	// labels of the workload, for a CREATE.
	Labels map[string]string `json:"labels,omitempty"`
	// backoff after a refusal: initial (default 200ms), doubling up to max (default 2s).
	Backoff *Backoff `json:"backoff,omitempty"`
	// user is the requester (default "operator").
	User string `json:"user,omitempty"`
	// fieldManager is the field manager the writer names in its requests, which the API
	// server keeps as the template's manager once a change is admitted (kubebuilder
	// operators all default to "manager"); unset names none. An apply with another user or
	// fieldManager than the workload's earlier ones is another writer: each keeps wanting
	// its own spec, as two controllers reconciling one workload do.
	FieldManager string `json:"fieldManager,omitempty"`
}

// Backoff is a requeue delay that doubles from Initial up to Max.
type Backoff struct {
	// initial is the first delay.
	Initial metav1.Duration `json:"initial"`
	// max is the longest delay.
	Max metav1.Duration `json:"max"`
}

// Drain is a drain tool draining the nodes, as `kubectl drain` does: it cordons each node
// and evicts each of its pods (skipping DaemonSet pods unless DaemonSets is set, as
// cluster-autoscaler and Karpenter evict them), retrying a 429.
type Drain struct {
	// nodes are the nodes drained.
	Nodes []string `json:"nodes"`
	// retryAfter is the drain tool's own wait after a 429 reaches it (kubectl drain: 5s).
	RetryAfter *metav1.Duration `json:"retryAfter,omitempty"`
	// clientRetries is how many times client-go silently retries a 429 that carries
	// Retry-After before the drain tool sees it (default 10, client-go's; 0 for none).
	ClientRetries *int `json:"clientRetries,omitempty"`
	// daemonSets evicts DaemonSet pods too.
	DaemonSets bool `json:"daemonSets,omitempty"`
	// sequential drains the nodes one after another, as one `kubectl drain a b c` does
	// (it cordons them all first); unset, they are drained at once, as by one drain per
	// node or by cluster-autoscaler.
	Sequential bool `json:"sequential,omitempty"`
	// user is the requester (default "kubernetes-admin").
	User string `json:"user,omitempty"`
	// groups are the requester's groups.
	Groups []string `json:"groups,omitempty"`
	// forceAfter is the drainer's deadline: once a pod's eviction has been deferred for this
	// long (from the first deferral), the drainer deletes the pod without an eviction, as
	// Karpenter does at its NodeClaim's termination time and platforms do after their
	// force-drain timeout. Unset, it waits for ever.
	ForceAfter *metav1.Duration `json:"forceAfter,omitempty"`
	// disableEviction deletes the pods instead of evicting them, as `kubectl drain
	// --disable-eviction` does: no PodDisruptionBudget holds a DELETE, only a
	// DisruptionPolicy with guardDeletes. kubectl gives the node up at the first refusal,
	// a 429 included: holdfast's refusal of a DELETE carries no Retry-After, so client-go
	// does not retry it either.
	DisableEviction bool `json:"disableEviction,omitempty"`
}

// NodeList names nodes.
type NodeList struct {
	// nodes are the nodes' names.
	Nodes []string `json:"nodes"`
}

// Expectations are what a run must show, measured on the simulated cluster as kube shows
// it. The limits given inline hold for every workload of the scenario; workloads gives
// limits for one workload.
type Expectations struct {
	Limits `json:",inline"`
	// drained true expects every drain to empty all its nodes; false expects every drain
	// to leave a node it could not empty (a budget that refuses).
	Drained *bool `json:"drained,omitempty"`
	// maxForced is the most pods a drain may force out at its deadline (forceAfter): 0
	// expects every hold to end before the drainer stops waiting.
	MaxForced *int32 `json:"maxForced,omitempty"`
	// minReleased is the fewest evictions holdfast must admit as released after maxHold
	// (afterMaxHold Release) over the run.
	MinReleased *int32 `json:"minReleased,omitempty"`
	// workloads are limits for one workload each, besides those for every workload.
	Workloads []WorkloadExpectations `json:"workloads,omitempty"`
}

// WorkloadExpectations are limits for one workload.
type WorkloadExpectations struct {
	// workload is the workload, named by the scenario's objects or an apply.
	Workload WorkloadRef `json:"workload"`
	Limits   `json:",inline"`
}

// Limits are what a workload's figures must keep to; unset ones are not checked.
type Limits struct {
	// maxTemplatesWithLivePods is the most pod templates (a Deployment's ReplicaSets, a
	// StatefulSet's or DaemonSet's ControllerRevisions) that may have pods that are not
	// terminating at one instant.
	MaxTemplatesWithLivePods *int32 `json:"maxTemplatesWithLivePods,omitempty"`
	// maxRevisions is the most ReplicaSets or ControllerRevisions the workload may have
	// made over the run, the starting one included.
	MaxRevisions *int32 `json:"maxRevisions,omitempty"`
	// maxUnavailable is the most of the workload's wanted pods that may be not serving
	// (not Ready, or terminating) at one instant, once all have first served.
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
	// minReady is the fewest of the workload's pods that may be serving (Ready and not
	// terminating) at one instant, once all have first served.
	MinReady *int32 `json:"minReady,omitempty"`
	// minEvictionGap is the least time allowed between two evictions of the workload's
	// pods.
	MinEvictionGap *metav1.Duration `json:"minEvictionGap,omitempty"`
	// convergedWithin is how long after the scenario's start the workload's operator may
	// take to have the spec it last wanted admitted and rolled out (every pod on its
	// template and Ready, as many as wanted); only workloads an apply drives are held to it.
	ConvergedWithin *metav1.Duration `json:"convergedWithin,omitempty"`
	// maxDisruptedDomains is the most topology domains (values of a node label) that may
	// have pods of the workload evicted and not yet replaced at one instant: an evicted pod
	// counts in its node's domain until a pod of the workload created after it serves, or
	// until as many serve as the workload wants.
	MaxDisruptedDomains *DomainLimit `json:"maxDisruptedDomains,omitempty"`
	// writersFighting true expects holdfast to report two writers alternating the
	// workload's templates (the RolloutPolicy's WritersFighting condition: two field
	// managers whose changes follow each other within its revertWindow, as the revision
	// journal records them); false expects none.
	WritersFighting *bool `json:"writersFighting,omitempty"`
	// refusalNamesWriters true expects a refused change of the workload whose message names
	// both writers: the request's field manager and the one that last changed the template.
	RefusalNamesWriters *bool `json:"refusalNamesWriters,omitempty"`
}

// DomainLimit is a limit on topology domains.
type DomainLimit struct {
	// key is the node label whose values are the domains.
	Key string `json:"key"`
	// max is the most domains allowed.
	Max int32 `json:"max"`
}
