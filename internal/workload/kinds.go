package workload

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Kinds are the workload kinds holdfast guards.
func Kinds() []v1alpha1.WorkloadKind {
	return []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet}
}

// Targeted are the kinds targets name: every guarded kind when they name none.
func Targeted(t v1alpha1.WorkloadTargets) []v1alpha1.WorkloadKind {
	if len(t.Kinds) == 0 {
		return Kinds()
	}
	return t.Kinds
}

// Scalable reports whether the kind has spec.replicas, and with it a scale subresource: a
// DaemonSet has neither, its pods follow its nodes.
func Scalable(kind v1alpha1.WorkloadKind) bool {
	return kind == v1alpha1.KindDeployment || kind == v1alpha1.KindStatefulSet
}

// RelabelsThroughStatus reports whether an update of the kind's status subresource may
// change its labels: kube's status strategies keep the old spec and nothing else for
// StatefulSets and DaemonSets (statefulSetStatusStrategy and daemonSetStatusStrategy's
// PrepareForUpdate, pkg/registry/apps), while deploymentStatusStrategy keeps the old
// labels too.
func RelabelsThroughStatus(kind v1alpha1.WorkloadKind) bool {
	return kind == v1alpha1.KindStatefulSet || kind == v1alpha1.KindDaemonSet
}

// Resource is the kind's apps/v1 resource, e.g. deployments.
func Resource(kind v1alpha1.WorkloadKind) string {
	return strings.ToLower(string(kind)) + "s"
}

// KindOfResource is the guarded kind an apps/v1 resource holds, and whether there is one.
func KindOfResource(resource string) (v1alpha1.WorkloadKind, bool) {
	for _, k := range Kinds() {
		if Resource(k) == resource {
			return k, true
		}
	}
	return "", false
}

// New returns an empty typed object of a guarded kind, ready to decode or read into.
func New(kind v1alpha1.WorkloadKind) (client.Object, error) {
	obj, _, err := goTypes(kind)
	return obj, err
}

// Each calls f with every workload of the kind in r (an informer cache: read it, never
// write it), without building a list (informer.Each).
func Each(ctx context.Context, r client.Reader, kind v1alpha1.WorkloadKind, f func(client.Object)) error {
	obj, list, err := goTypes(kind)
	if err != nil {
		return err
	}
	return informer.Each(ctx, r, obj, list, f)
}

// EachInNamespaces is Each over the namespaces named alone (informer.EachInNamespaces).
func EachInNamespaces(ctx context.Context, r client.Reader, kind v1alpha1.WorkloadKind, namespaces []string, f func(client.Object)) error {
	obj, list, err := goTypes(kind)
	if err != nil {
		return err
	}
	return informer.EachInNamespaces(ctx, r, obj, list, namespaces, f)
}

// NewList returns an empty list of a guarded kind.
func NewList(kind v1alpha1.WorkloadKind) (client.ObjectList, error) {
	_, list, err := goTypes(kind)
	return list, err
}

// goTypes are a guarded kind's empty object and list: the one switch from a kind to its
// Go types.
func goTypes(kind v1alpha1.WorkloadKind) (client.Object, client.ObjectList, error) {
	switch kind {
	case v1alpha1.KindDeployment:
		return &appsv1.Deployment{}, &appsv1.DeploymentList{}, nil
	case v1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, nil
	case v1alpha1.KindDaemonSet:
		return &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}, nil
	}
	return nil, nil, unsupported(kind)
}

func unsupported(kind v1alpha1.WorkloadKind) error {
	return fmt.Errorf("unsupported kind %q: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", kind)
}

// expected is how many pods a workload of the kind expects: spec.replicas (1 when unset,
// as the API server defaults it), or a DaemonSet's desiredNumberScheduled.
func expected(kind v1alpha1.WorkloadKind, replicas *int32, desiredNumberScheduled int32) int32 {
	if kind == v1alpha1.KindDaemonSet {
		return desiredNumberScheduled
	}
	return ptr.Deref(replicas, 1)
}

// Ref names a workload.
type Ref struct {
	Kind      v1alpha1.WorkloadKind
	Namespace string
	Name      string
	// UID identifies the workload as the owner of its ReplicaSets, ControllerRevisions and pods.
	UID types.UID
}

// String names the workload as kind namespace/name, for messages and ledger records.
func (r Ref) String() string {
	return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
}

// ParseRef reads a Ref back from its String, without the UID, which String leaves out; ok
// is false for a string of another shape.
func ParseRef(s string) (r Ref, ok bool) {
	kind, rest, ok := strings.Cut(s, " ")
	if !ok {
		return Ref{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	return Ref{Kind: v1alpha1.WorkloadKind(kind), Namespace: ns, Name: name}, ok
}

// Meta is what is read of a typed workload without its pod template's spec: which it is,
// which pods it selects and how many it expects. The PDB generator and the eviction guard
// read workloads this way.
type Meta struct {
	Ref
	Selector *metav1.LabelSelector
	// PodLabels are the pod template's labels, which DisruptionPolicies select; Labels the
	// workload's own, which RolloutPolicies select.
	PodLabels, Labels map[string]string
	// Expected is spec.replicas, or a DaemonSet's desiredNumberScheduled.
	Expected int32
}

// MetaOf reads a typed workload; ok is false for other kinds. The selector and labels are
// the object's own.
func MetaOf(obj any) (m Meta, ok bool) {
	if r, ok := obj.(recorded); ok {
		return r.metaOf(), true
	}
	f, ok := fieldsOf(obj)
	if !ok {
		return Meta{}, false
	}
	var replicas *int32
	if f.replicas != nil {
		replicas = *f.replicas
	}
	return Meta{Ref: Ref{Kind: f.kind, Namespace: f.meta.Namespace, Name: f.meta.Name, UID: f.meta.UID}, Selector: f.selector,
		PodLabels: f.template.Labels, Labels: f.meta.Labels, Expected: expected(f.kind, replicas, f.desired)}, true
}

// PodTemplate is a typed workload's spec.template, in the object: writing it writes the
// object. It is nil for other kinds.
func PodTemplate(obj any) *corev1.PodTemplateSpec {
	f, _ := fieldsOf(obj)
	return f.template
}

// SetReplicas sets a typed workload's spec.replicas to n, and reports whether it has
// them (DaemonSets and other kinds do not).
func SetReplicas(obj any, n int32) bool {
	f, _ := fieldsOf(obj)
	if f.replicas == nil {
		return false
	}
	*f.replicas = &n
	return true
}

// fields points into a typed workload at what every guarded kind has: fieldsOf is the one
// switch from the kinds' Go types to the fields they share (leanOf reads the strategies
// and statuses, which differ).
type fields struct {
	kind     v1alpha1.WorkloadKind
	meta     *metav1.ObjectMeta
	selector *metav1.LabelSelector
	template *corev1.PodTemplateSpec
	// replicas is spec.replicas; nil for a DaemonSet, which has none and expects
	// desired (status.desiredNumberScheduled) pods.
	replicas **int32
	desired  int32
}

func fieldsOf(obj any) (fields, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return fields{kind: v1alpha1.KindDeployment, meta: &o.ObjectMeta, selector: o.Spec.Selector, template: &o.Spec.Template, replicas: &o.Spec.Replicas}, true
	case *appsv1.StatefulSet:
		return fields{kind: v1alpha1.KindStatefulSet, meta: &o.ObjectMeta, selector: o.Spec.Selector, template: &o.Spec.Template, replicas: &o.Spec.Replicas}, true
	case *appsv1.DaemonSet:
		return fields{kind: v1alpha1.KindDaemonSet, meta: &o.ObjectMeta, selector: o.Spec.Selector, template: &o.Spec.Template, desired: o.Status.DesiredNumberScheduled}, true
	}
	return fields{}, false
}
