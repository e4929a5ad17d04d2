// Package history reads a workload's revision history the way kube's controllers keep
// it: ReplicaSets for Deployments, ControllerRevisions for StatefulSets and DaemonSets.
// It reads from the cluster (informer caches), never from webhook memory, so that every
// holdfast replica decides from the same facts.
package history

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Revision is one pod-template revision of a workload.
type Revision struct {
	// Name is the ReplicaSet's or ControllerRevision's name.
	Name string
	// Number is the revision number; kube renumbers a revision that is rolled back to.
	Number int64
	// Template is the revision's pod template, with the fingerprint the cache computed.
	Template *workload.Template
	// Created is when the ReplicaSet or ControllerRevision was created; see History.Current
	// for when it last became the workload's current revision.
	Created time.Time
	// Serving counts the revision's pods that are available (ReplicaSets) or Ready
	// (pods of a ControllerRevision) now; Pods counts all of them but the terminating.
	Serving, Pods int32
	// Live counts the revision's pods that have not ended, terminating ones included: a
	// template with live pods is one an operator sees running (docs/invariants.md).
	Live int32
	// Kept counts the revision's pods that have neither ended nor begun terminating: those
	// its controller keeps (a ReplicaSet's status.replicas); any other pod of an ordinal or
	// node it owns is replaced. A StatefulSet's adoptable history (ReadAdoptable) counts
	// only what its controller keeps: orphans and its own pods, one per ordinal in its
	// range (it deletes the others).
	Kept int32
	// Renumbered are the numbers a ReplicaSet had before kube renumbered it on a return to
	// its template, oldest first (the deployment.kubernetes.io/revision-history annotation).
	// A ControllerRevision keeps none: only its newest number tells.
	Renumbered []int64

	// joined holds when the node of each of its serving pods joined the cluster, once
	// FromControllerRevisions is given the nodes (ServingBefore).
	joined []time.Time
}

// ServingBefore counts r's serving pods on nodes that had joined the cluster by t; a pod
// on a node the cache does not hold does not count (a node deleted while its pods linger
// until the pod garbage collector removes them, or one that joined a moment ago), unless
// the cache holds no node at all (read then as nodes not known). It is a DaemonSet's progress on the nodes that needed its
// rollout when it began at t: kube's DaemonSet controller creates the pod of a node that
// joins later from the current revision (syncNodes, pkg/controller/daemon/
// daemon_controller.go), which is the cluster growing, not the rollout progressing.
// Without the nodes it is Serving.
func (r *Revision) ServingBefore(t time.Time) int32 {
	if r.joined == nil {
		return r.Serving
	}
	var n int32
	for _, j := range r.joined {
		if !j.After(t) {
			n++
		}
	}
	return n
}

// Numbered is a revision number and the revision that had it.
type Numbered struct {
	Number   int64
	Revision *Revision
}

// NumberedAfter lists, oldest first, the numbers above n that the revisions have or had,
// each with its revision: kube numbers a template each time it becomes current (a return
// renumbers the revision it had), so these are the templates that became current after
// the one numbered n, as far as the cluster still tells (a ControllerRevision keeps only
// its newest number).
func (h History) NumberedAfter(n int64) []Numbered {
	var out []Numbered
	for i := range h.Revisions {
		r := &h.Revisions[i]
		for _, k := range r.Renumbered {
			if k > n {
				out = append(out, Numbered{k, r})
			}
		}
		if r.Number > n {
			out = append(out, Numbered{r.Number, r})
		}
	}
	slices.SortFunc(out, func(a, b Numbered) int { return cmp.Compare(a.Number, b.Number) })
	return out
}

// History is what the cluster knows of a workload's revisions and pods.
type History struct {
	// Revisions are ordered oldest first, by revision number.
	Revisions []Revision
	// LastActivity is the newest pod creation or readiness change among the workload's
	// pods; zero when none is known.
	LastActivity time.Time
	// Nodes is when each node the cache holds joined the cluster (its creation), read for
	// a DaemonSet with pods; nil when not read (NodesBefore).
	Nodes []time.Time
	// Selected counts the live pods (terminating ones included) in the workload's
	// namespace that its selector matches, whatever owns them: its own, and any its
	// controller may still adopt (an orphaning delete's) or that a deleted workload of its
	// name left terminating. Read only when asked (ReadSelected, which sets SelectedRead).
	Selected     int32
	SelectedRead bool
}

// NodesBefore counts the nodes there are now that had joined the cluster by t: those a
// DaemonSet's rollout that began at t had to update, less those that left since. false
// when the nodes were not read.
func (h History) NodesBefore(t time.Time) (int32, bool) {
	if h.Nodes == nil {
		return 0, false
	}
	var n int32
	for _, j := range h.Nodes {
		if !j.After(t) {
			n++
		}
	}
	return n, true
}

// Find returns the revision whose template equals t (workload.SameTemplate), or nil.
func (h History) Find(t *workload.Template) *Revision {
	for i := range h.Revisions {
		if workload.SameTemplate(h.Revisions[i].Template, t) {
			return &h.Revisions[i]
		}
	}
	return nil
}

// Successor returns the revision that followed r, or nil when r is the newest.
func (h History) Successor(r *Revision) *Revision {
	for i := range h.Revisions {
		if h.Revisions[i].Name == r.Name && i+1 < len(h.Revisions) {
			return &h.Revisions[i+1]
		}
	}
	return nil
}

// Current returns when r last became the workload's current revision, as far as the
// cluster tells. That is its creation, unless kube renumbered it when the workload was
// rolled back to it: the cluster does not record when, but revisions are numbered in the
// order they become current, so r became current after every revision that had a number
// below its own was created (a ReplicaSet renumbered since keeps its earlier numbers,
// Renumbered: after A → B → A → B, A's return came after B's creation though B's number is
// now above A's). Current is the latest of those times, a lower bound of the rollback's.
func (h History) Current(r *Revision) time.Time {
	t := r.Created
	for i := range h.Revisions {
		o := &h.Revisions[i]
		if o.Name == r.Name || !o.Created.After(t) {
			continue
		}
		if o.Number < r.Number || slices.ContainsFunc(o.Renumbered, func(k int64) bool { return k < r.Number }) {
			t = o.Created
		}
	}
	return t
}

// LiveBesides is whether a revision of a template other than sum (a fingerprint,
// workload.Template.Sum) has live pods: the workload runs more than that template.
func (h History) LiveBesides(sum string) bool {
	for i := range h.Revisions {
		r := &h.Revisions[i]
		if r.Live > 0 && (r.Template == nil || !r.Template.SumIs(sum)) {
			return true
		}
	}
	return false
}

// Newest returns the newest revision, or nil when none is known.
func (h History) Newest() *Revision {
	if len(h.Revisions) == 0 {
		return nil
	}
	return &h.Revisions[len(h.Revisions)-1]
}

// FromReplicaSets builds a Deployment's revisions from the ReplicaSets it controls (all of
// them when owner is empty).
func FromReplicaSets(owner types.UID, sets []appsv1.ReplicaSet) []Revision {
	out := make([]Revision, 0, len(sets))
	templates := make([]workload.Template, len(sets)) // one allocation for all
	for i := range sets {
		rs := &sets[i]
		if owner != "" && !workload.ControlledBy(rs.OwnerReferences, owner) {
			continue
		}
		out = append(out, Revision{
			Name:       rs.Name,
			Number:     revisionNumber(rs.Annotations[revisionAnnotation]),
			Renumbered: revisionNumbers(rs.Annotations[revisionHistoryAnnotation]),
			Template:   revisionTemplate(&templates[i], &rs.Spec.Template, rs.Annotations),
			Created:    rs.CreationTimestamp.Time,
			Serving:    rs.Status.AvailableReplicas,
			Pods:       rs.Status.Replicas,
			Kept:       rs.Status.Replicas, // active pods: neither ended nor terminating (FilterActivePods)
			// kube counts terminating pods apart (terminatingReplicas, on by default).
			Live: rs.Status.Replicas + ptr.Deref(rs.Status.TerminatingReplicas, 0),
		})
	}
	sortRevisions(out)
	return out
}

// The annotations kube's Deployment controller numbers its ReplicaSets with
// (SetNewReplicaSetAnnotations, pkg/controller/deployment/util/deployment_util.go).
const (
	revisionAnnotation        = "deployment.kubernetes.io/revision"
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
)

// FromControllerRevisions builds a StatefulSet's or DaemonSet's revisions from its
// ControllerRevisions, whose data holds the pod template, and counts each revision's
// Ready pods by their controller-revision-hash label. joined, when not nil, is when each
// node joined the cluster (its creation), for ServingBefore.
func FromControllerRevisions(owner types.UID, ownerName string, revisions []appsv1.ControllerRevision, pods []corev1.Pod, joined map[string]time.Time) ([]Revision, error) {
	var out []Revision
	for i := range revisions {
		cr := &revisions[i]
		if owner != "" && !workload.ControlledBy(cr.OwnerReferences, owner) {
			continue
		}
		var t *workload.Template
		if len(cr.Data.Raw) == 0 {
			t = workload.FromFingerprint(cr.Annotations[workload.FingerprintAnnotation]) // slimmed by the cache
		}
		if t == nil {
			spec, err := TemplateOf(cr)
			if err != nil {
				return nil, err
			}
			t = workload.FromSpec(spec, "") // fingerprinted from itself, as a ReplicaSet's (revisionTemplate)
		}
		r := Revision{Name: cr.Name, Number: cr.Revision, Template: t, Created: cr.CreationTimestamp.Time}
		if joined != nil {
			r.joined = []time.Time{} // read: a revision with no pod on a known node serves none there
		}
		for j := range pods {
			p := &pods[j]
			h := p.Labels[appsv1.ControllerRevisionHashLabelKey]
			if h == "" || (h != cr.Name && ownerName+"-"+h != cr.Name) {
				continue
			}
			if !workload.PodEnded(p) {
				r.Live++
				if p.DeletionTimestamp == nil {
					r.Kept++
				}
			}
			if p.DeletionTimestamp == nil {
				r.Pods++
				if workload.PodServing(p) {
					r.Serving++
					if at, known := joined[p.Spec.NodeName]; known {
						r.joined = append(r.joined, at)
					}
				}
			}
		}
		out = append(out, r)
	}
	sortRevisions(out)
	return out, nil
}

// TemplateOf decodes the pod template from a ControllerRevision's data, a strategic
// merge patch of the form {"spec":{"template":{…,"$patch":"replace"}}}.
func TemplateOf(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var patch struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if len(cr.Data.Raw) == 0 {
		return nil, fmt.Errorf("ControllerRevision %s/%s has no data", cr.Namespace, cr.Name)
	}
	if err := json.Unmarshal(cr.Data.Raw, &patch); err != nil {
		return nil, fmt.Errorf("decoding ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	if patch.Spec.Template == nil {
		return nil, fmt.Errorf("ControllerRevision %s/%s holds no pod template", cr.Namespace, cr.Name)
	}
	return patch.Spec.Template, nil
}

func revisionNumber(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0 // not yet numbered by the Deployment controller: the oldest possible
	}
	return n
}

// revisionNumbers reads a revision-history annotation, "1,3"; a number that does not
// parse is left out.
func revisionNumbers(s string) []int64 {
	if s == "" {
		return nil
	}
	var out []int64
	for f := range strings.SplitSeq(s, ",") {
		if n, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func sortRevisions(rs []Revision) {
	slices.SortStableFunc(rs, func(a, b Revision) int {
		if a.Number != b.Number {
			return cmp.Compare(a.Number, b.Number)
		}
		return a.Created.Compare(b.Created)
	})
}

// revisionTemplate is a ReplicaSet's template, or its fingerprint alone once Slim dropped it.
// The fingerprint annotation is read only then: on a ReplicaSet read from the API server it
// is whatever the cluster holds (anyone who may edit ReplicaSets may write it, and the
// Deployment controller copies a Deployment's annotations to its ReplicaSets), so a
// template that is there is fingerprinted from itself.
func revisionTemplate(dst *workload.Template, t *corev1.PodTemplateSpec, annotations map[string]string) *workload.Template {
	if t.Spec.Containers == nil {
		if _, ok := dst.Wrap(nil, annotations[workload.FingerprintAnnotation]).Sum(); ok {
			return dst // slimmed by the cache: known by its fingerprint
		}
	}
	return dst.Wrap(t, "")
}

// Slim is the cache transform for ReplicaSets and ControllerRevisions: it records the
// fingerprint of the revision's pod template (Fingerprint) and drops the template, which
// no decision reads once its fingerprint is known: at thousands of workloads the
// revisions' templates are a third of the cache.
func Slim(obj any) (any, error) {
	if _, err := Fingerprint(obj); err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		if o.Annotations[workload.FingerprintAnnotation] != "" {
			o.Spec.Template = corev1.PodTemplateSpec{}
		}
		// One map for its labels and its selector's when they hold the same labels, as a
		// ReplicaSet of a Deployment selecting by its template's labels does (the cache's
		// objects are read, never written).
		if sel := o.Spec.Selector; sel != nil && maps.Equal(sel.MatchLabels, o.Labels) {
			sel.MatchLabels = o.Labels
		}
	case *appsv1.ControllerRevision:
		if o.Annotations[workload.FingerprintAnnotation] != "" {
			o.Data = runtime.RawExtension{}
		}
	}
	return obj, nil
}

// Fingerprint records the fingerprint of a ReplicaSet's or ControllerRevision's pod
// template in workload.FingerprintAnnotation, so that comparing a request's template with
// the workload's history is a hash comparison instead of a decode and deep comparison.
// Other objects pass unchanged.
func Fingerprint(obj any) (any, error) {
	var t *corev1.PodTemplateSpec
	var m *metav1.ObjectMeta
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		if o.Spec.Template.Spec.Containers == nil && o.Annotations[workload.FingerprintAnnotation] != "" {
			// Slimmed already: a transform may see an object twice (an informer's initial
			// list streamed as a watch passes each through its store and its queue), and a
			// second look would fingerprint the emptied template. kube requires a container.
			return obj, nil
		}
		t, m = &o.Spec.Template, &o.ObjectMeta
	case *appsv1.ControllerRevision:
		if len(o.Data.Raw) == 0 && o.Data.Object == nil && o.Annotations[workload.FingerprintAnnotation] != "" {
			return obj, nil // slimmed already (kube requires a revision's data)
		}
		var err error
		if t, err = TemplateOf(o); err != nil {
			// Read reports it, unless an annotation it arrived with stands in for it.
			delete(o.Annotations, workload.FingerprintAnnotation)
			return obj, nil
		}
		m = &o.ObjectMeta
	default:
		return obj, nil
	}
	sum, err := workload.Fingerprint(t)
	if err != nil {
		delete(m.Annotations, workload.FingerprintAnnotation) // one the object arrived with is not its template's
		return obj, nil                                       // compared semantically instead
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[workload.FingerprintAnnotation] = sum
	return obj, nil
}
