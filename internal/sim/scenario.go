// Package sim is `holdfast simulate`: it replays a scenario (a cluster's workloads, nodes
// and policies, and a timeline of template changes by an operator that requeues on
// refusal, and of node drains by a drain tool that retries) through holdfast's production
// handlers and journal recorder, on a virtual clock, with kube's controllers modelled by
// kubemodel, the same model the rollout guard's model tests run. It reports each request
// and holdfast's answer, and the figures the field's incidents were measured by:
// revisions, peak pods, the most pods unavailable at once, and how long drains took.
package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/manifests"
	"github.com/holdfast-dev/holdfast/internal/validation"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// ScenarioKind is the kind of the document that holds a scenario's settings and timeline;
// its apiVersion is holdfast.dev/v1alpha1. It is a file format, not a cluster resource.
const ScenarioKind = "Scenario"

// Scenario is a scenario file: its Scenario document and the objects the cluster starts with.
type Scenario struct {
	Name string
	Spec Spec
	// Objects are the cluster's objects at the start: Namespaces, Nodes, Deployments,
	// StatefulSets, DaemonSets, RolloutPolicies and DisruptionPolicies. A workload starts
	// rolled out, its pods Ready for an hour.
	Objects []Object
}

// Object is one object of a scenario, named by where it was read.
type Object struct {
	Source string
	Object client.Object
}

// scenarioDocument is the Scenario document as written.
type scenarioDocument struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       Spec              `json:"spec"`
}

// Spec is a scenario's settings and timeline.
type Spec struct {
	Description string `json:"description,omitempty"`
	// Nodes adds groups of nodes, besides the Node objects given.
	Nodes []NodeGroup `json:"nodes,omitempty"`
	// PodStartup is how long a scheduled pod takes to become Ready (default 1s).
	PodStartup *metav1.Duration `json:"podStartup,omitempty"`
	// PodTermination is how long a deleted or evicted pod takes to be gone (default: its
	// terminationGracePeriodSeconds, 30s unless set).
	PodTermination *metav1.Duration `json:"podTermination,omitempty"`
	// Until ends the simulation at the latest (default 30m); it ends earlier once every
	// operator has what it wants, every drain is done and no pod is about to change.
	Until *metav1.Duration `json:"until,omitempty"`
	// Timeline is what happens, at times from the start.
	Timeline []Step `json:"timeline"`
}

// NodeGroup is count nodes named prefix-0, prefix-1, …
type NodeGroup struct {
	Prefix string            `json:"prefix"`
	Count  int               `json:"count"`
	Labels map[string]string `json:"labels,omitempty"`
	// Unschedulable nodes are cordoned at the start.
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// Step is one thing that happens at At: exactly one of its operations.
type Step struct {
	At       metav1.Duration `json:"at"`
	Apply    *Apply          `json:"apply,omitempty"`
	Drain    *Drain          `json:"drain,omitempty"`
	Cordon   *NodeList       `json:"cordon,omitempty"`
	Uncordon *NodeList       `json:"uncordon,omitempty"`
}

// WorkloadRef is how a scenario file names a workload. The simulator works with the
// workload.Ref it names (Ref); the file format keeps a type of its own because
// workload.Ref has no JSON names and carries a UID, which a scenario never gives.
type WorkloadRef struct {
	Kind      v1alpha1.WorkloadKind `json:"kind"`
	Namespace string                `json:"namespace"`
	Name      string                `json:"name"`
}

// Ref is the workload r names.
func (r WorkloadRef) Ref() workload.Ref {
	return workload.Ref{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// Apply is an operator that wants the workload to have this spec from At on: it sends the
// change (a CREATE when the workload does not exist) and, refused, requeues with backoff
// until admitted or until a later Apply of the same workload changes what it wants.
type Apply struct {
	Workload WorkloadRef `json:"workload"`
	// Template is the pod template it wants; unset keeps the workload's.
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`
	// Replicas it wants (Deployments and StatefulSets); unset keeps the workload's.
	Replicas *int32 `json:"replicas,omitempty"`
	// Labels of the workload, for a CREATE.
	Labels map[string]string `json:"labels,omitempty"`
	// Backoff after a refusal: Initial (default 200ms), doubling up to Max (default 2s).
	Backoff *Backoff `json:"backoff,omitempty"`
	// User is the requester (default "operator").
	User string `json:"user,omitempty"`
}

// Backoff is a requeue delay that doubles from Initial up to Max.
type Backoff struct {
	Initial metav1.Duration `json:"initial"`
	Max     metav1.Duration `json:"max"`
}

// Drain is a drain tool draining the nodes, as `kubectl drain` does: it cordons each node
// and evicts each of its pods (skipping DaemonSet pods unless DaemonSets is set,
// as cluster-autoscaler and Karpenter evict them), retrying a 429.
type Drain struct {
	Nodes []string `json:"nodes"`
	// RetryAfter is the drain tool's own wait after a 429 reaches it (kubectl drain: 5s).
	RetryAfter *metav1.Duration `json:"retryAfter,omitempty"`
	// ClientRetries is how many times client-go silently retries a 429 that carries
	// Retry-After before the drain tool sees it (default 10, client-go's; 0 for none).
	ClientRetries *int `json:"clientRetries,omitempty"`
	// DaemonSets evicts DaemonSet pods too.
	DaemonSets bool `json:"daemonSets,omitempty"`
	// Sequential drains the nodes one after another, as one `kubectl drain a b c` does
	// (it cordons them all first); unset, they are drained at once, as by one drain per
	// node or by cluster-autoscaler.
	Sequential bool `json:"sequential,omitempty"`
	// User is the requester (default "kubernetes-admin").
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// NodeList names nodes.
type NodeList struct {
	Nodes []string `json:"nodes"`
}

const (
	defaultStartup     = time.Second
	defaultUntil       = 30 * time.Minute
	defaultBackoff     = 200 * time.Millisecond
	defaultMaxBackoff  = 2 * time.Second
	defaultDrainRetry  = 5 * time.Second
	defaultClientRetry = 10
)

// Load reads a scenario from files and directories ("-" is stdin): exactly one Scenario
// document and the cluster's objects. Every error names the file and document.
func Load(paths []string, stdin io.Reader) (*Scenario, error) {
	decoder := serializer.NewCodecFactory(informer.NewScheme()).UniversalDeserializer()
	sc := &Scenario{}
	found := ""
	err := manifests.Each(paths, stdin, func(source string, raw []byte) error {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		if tm.Kind == ScenarioKind {
			if found != "" {
				return fmt.Errorf("%s: a second Scenario (the first is at %s)", source, found)
			}
			var doc scenarioDocument
			if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
				return fmt.Errorf("%s: Scenario: %w", source, err)
			}
			if doc.APIVersion != v1alpha1.GroupVersion.String() {
				return fmt.Errorf("%s: Scenario: apiVersion %q, want %s", source, doc.APIVersion, v1alpha1.GroupVersion)
			}
			found, sc.Name, sc.Spec = source, doc.Metadata.Name, doc.Spec
			return nil
		}
		if gv, _ := schema.ParseGroupVersion(tm.APIVersion); gv.Group == v1alpha1.GroupVersion.Group {
			// A policy is what the API server, with holdfast's policy webhook, would store
			// of it, defaults included; what they would refuse never reaches the cluster.
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			p, errs := validation.Admit(u)
			if len(errs) > 0 {
				return fmt.Errorf("%s: %w", source, apierrors.NewInvalid(u.GroupVersionKind().GroupKind(), u.GetName(), errs))
			}
			sc.Objects = append(sc.Objects, Object{Source: source, Object: p})
			return nil
		}
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		co, ok := obj.(client.Object)
		if !ok || !simulated(obj) {
			return fmt.Errorf("%s: a %s: a scenario holds Namespaces, Nodes, Deployments, StatefulSets, DaemonSets, RolloutPolicies and DisruptionPolicies", source, tm.Kind)
		}
		sc.Objects = append(sc.Objects, Object{Source: source, Object: co})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found == "" {
		return nil, fmt.Errorf("%s: no Scenario document (apiVersion: %s, kind: %s)", strings.Join(paths, ", "), v1alpha1.GroupVersion, ScenarioKind)
	}
	if err := sc.validate(found); err != nil {
		return nil, err
	}
	return sc, nil
}

func simulated(obj runtime.Object) bool {
	if _, ok := workload.MetaOf(obj); ok {
		return true
	}
	switch obj.(type) {
	case *corev1.Namespace, *corev1.Node, *v1alpha1.RolloutPolicy, *v1alpha1.DisruptionPolicy:
		return true
	}
	return false
}

// validate checks the timeline: one operation per step, in order, naming what exists.
func (sc *Scenario) validate(source string) error {
	var last time.Duration
	for i, st := range sc.Spec.Timeline {
		where := fmt.Sprintf("%s: spec.timeline[%d]", source, i)
		n := 0
		for _, set := range []bool{st.Apply != nil, st.Drain != nil, st.Cordon != nil, st.Uncordon != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: want exactly one of apply, drain, cordon, uncordon; have %d", where, n)
		}
		if st.At.Duration < last {
			return fmt.Errorf("%s: at %s comes before the previous step's %s", where, st.At.Duration, last)
		}
		last = st.At.Duration
		if a := st.Apply; a != nil {
			if !slices.Contains(workload.Kinds(), a.Workload.Kind) {
				return fmt.Errorf("%s.apply.workload.kind: %q, want Deployment, StatefulSet or DaemonSet", where, a.Workload.Kind)
			}
			if a.Workload.Namespace == "" || a.Workload.Name == "" {
				return fmt.Errorf("%s.apply.workload: namespace and name are required", where)
			}
			if a.Template == nil && a.Replicas == nil {
				return fmt.Errorf("%s.apply: set a template, replicas or both", where)
			}
			if b := a.Backoff; b != nil && (b.Initial.Duration <= 0 || b.Max.Duration < b.Initial.Duration) {
				return fmt.Errorf("%s.apply.backoff: want 0 < initial <= max", where)
			}
			if a.Replicas != nil && (!workload.Scalable(a.Workload.Kind) || *a.Replicas < 0) {
				return fmt.Errorf("%s.apply.replicas: a DaemonSet has none, and a count is never negative", where)
			}
			if tpl := a.Template; tpl != nil && len(tpl.Spec.Containers) == 0 {
				return fmt.Errorf("%s.apply.template.spec.containers: a pod needs a container", where)
			}
			if tpl := a.Template; tpl != nil && len(tpl.Labels) == 0 {
				return fmt.Errorf("%s.apply.template.metadata.labels: a pod template needs labels for its workload's selector", where)
			}
		}
		if d := st.Drain; d != nil {
			if len(d.Nodes) == 0 {
				return fmt.Errorf("%s.drain.nodes: name at least one node", where)
			}
			if d.RetryAfter != nil && d.RetryAfter.Duration <= 0 {
				return fmt.Errorf("%s.drain.retryAfter: want a positive wait", where)
			}
			if d.ClientRetries != nil && *d.ClientRetries < 0 {
				return fmt.Errorf("%s.drain.clientRetries: never negative", where)
			}
		}
	}
	for name, d := range map[string]*metav1.Duration{"podStartup": sc.Spec.PodStartup, "podTermination": sc.Spec.PodTermination, "until": sc.Spec.Until} {
		if d != nil && d.Duration < 0 {
			return fmt.Errorf("%s: spec.%s: %s is negative", source, name, d.Duration)
		}
	}
	if until := durationOr(sc.Spec.Until, defaultUntil); last > until {
		return fmt.Errorf("%s: spec.until: %s ends the scenario before its last step at %s", source, until, last)
	}
	prefixes := map[string]bool{}
	for _, g := range sc.Spec.Nodes {
		if g.Prefix == "" || g.Count <= 0 {
			return fmt.Errorf("%s: spec.nodes: a group needs a prefix and a positive count", source)
		}
		if prefixes[g.Prefix] {
			return fmt.Errorf("%s: spec.nodes: two groups named %s", source, g.Prefix)
		}
		prefixes[g.Prefix] = true
	}
	return nil
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
