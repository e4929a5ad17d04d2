package workload

import (
	"encoding/base64"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Record is the cache's transform after Pack: a Deployment, StatefulSet or DaemonSet whose
// template Pack packed becomes its record, the same object without the struct of its pod
// template's spec (592 bytes, empty once packed) and its template's metadata beyond labels
// and annotations. A management cluster's thousands of unguarded workloads each cost
// their struct, most of which that is. Anything else passes unchanged: an object whose
// template could not be packed stays typed.
//
// A record is a client.Object of its own type: the cache's reads hand out the typed
// object it stands for (informer.Record), and so do its informers' handlers. Walks of the
// store (informer.Each) hand out records: MetaOf reads them, informer.Typed converts them.
func Record(obj any) (any, error) {
	f, ok := fieldsOf(obj)
	if !ok || !reflect.ValueOf(&f.template.Spec).Elem().IsZero() {
		return obj, nil
	}
	base := record{ObjectMeta: *f.meta, selector: f.selector, labels: f.template.Labels, annotations: f.template.Annotations}
	if a := base.Annotations; len(a) == 2 && a[FingerprintAnnotation] != "" {
		encoded := a[PackedTemplateAnnotation]
		if packed, err := base64.StdEncoding.DecodeString(encoded); err == nil && len(packed) > 0 &&
			base64.StdEncoding.EncodeToString(packed) == encoded {
			// Pack's two annotations, its only ones: a map costs more than both strings.
			base.fingerprint, base.packed, base.Annotations = a[FingerprintAnnotation], string(packed), nil
		}
	}
	if meta := reflect.ValueOf(&f.template.ObjectMeta).Elem(); !onlyLabelled(meta) {
		rest := f.template.ObjectMeta
		rest.Labels, rest.Annotations = nil, nil
		base.rest = &rest
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s := o.Spec
		return &deploymentRecord{record: base, replicas: s.Replicas, strategy: s.Strategy, minReadySeconds: s.MinReadySeconds,
			revisionHistoryLimit: s.RevisionHistoryLimit, paused: s.Paused, progressDeadlineSeconds: s.ProgressDeadlineSeconds, status: o.Status}, nil
	case *appsv1.StatefulSet:
		s := o.Spec
		return &statefulSetRecord{record: base, replicas: s.Replicas, volumeClaimTemplates: s.VolumeClaimTemplates, serviceName: s.ServiceName,
			podManagementPolicy: s.PodManagementPolicy, updateStrategy: s.UpdateStrategy, revisionHistoryLimit: s.RevisionHistoryLimit,
			minReadySeconds: s.MinReadySeconds, retention: s.PersistentVolumeClaimRetentionPolicy, ordinals: s.Ordinals, status: o.Status}, nil
	case *appsv1.DaemonSet:
		s := o.Spec
		return &daemonSetRecord{record: base, updateStrategy: s.UpdateStrategy, minReadySeconds: s.MinReadySeconds,
			revisionHistoryLimit: s.RevisionHistoryLimit, status: o.Status}, nil
	}
	return obj, nil
}

// onlyLabelled is whether an ObjectMeta holds nothing but labels and annotations.
func onlyLabelled(meta reflect.Value) bool {
	for i := range meta.NumField() {
		if name := meta.Type().Field(i).Name; name != "Labels" && name != "Annotations" && !meta.Field(i).IsZero() {
			return false
		}
	}
	return true
}

// recorded is what the records of every kind do: informer.Record's methods, and MetaOf's
// fields.
type recorded interface {
	informer.Record
	metaOf() Meta
}

// record is what the records of every kind hold: the workload's metadata (its own, and
// its template's labels and annotations) and selector.
type record struct {
	metav1.ObjectMeta
	selector            *metav1.LabelSelector
	labels, annotations map[string]string
	// rest is the template's metadata when it holds more than labels and annotations.
	rest *metav1.ObjectMeta
	// fingerprint and packed are Pack's annotations, the template packed in its bytes
	// rather than base64, when those two are the workload's annotations (ObjectMeta's are
	// then nil): the object the record stands for has them.
	fingerprint, packed string
}

// meta is the workload's metadata, Pack's annotations in a map of their own.
func (r *record) meta() metav1.ObjectMeta {
	m := r.ObjectMeta
	if r.fingerprint != "" {
		m.Annotations = map[string]string{FingerprintAnnotation: r.fingerprint,
			PackedTemplateAnnotation: base64.StdEncoding.EncodeToString([]byte(r.packed))}
	}
	return m
}

// GetObjectKind implements runtime.Object: a record carries no kind.
func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// template is the template the record keeps: its metadata, without a spec.
func (r *record) template() corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{}
	if r.rest != nil {
		t.ObjectMeta = *r.rest
	}
	t.Labels, t.Annotations = r.labels, r.annotations
	return t
}

// into sets obj to typed (whose maps and slices are the record's), or to its deep copy.
func into[T any, P interface {
	*T
	client.Object
	DeepCopy() P
}](obj client.Object, typed T, gvk schema.GroupVersionKind, deep bool) bool {
	o, ok := obj.(P)
	if !ok {
		return false
	}
	*o = typed
	if deep {
		*o = *o.DeepCopy()
	}
	o.GetObjectKind().SetGroupVersionKind(gvk)
	return true
}

// metaOf is MetaOf of a record of kind, whose spec.replicas is replicas (nil: it has none)
// and status.desiredNumberScheduled desired.
func (r *record) metaOf(kind v1alpha1.WorkloadKind, replicas *int32, desired int32) Meta {
	return Meta{Ref: Ref{Kind: kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}, Selector: r.selector,
		PodLabels: r.labels, Labels: r.Labels, Expected: expected(kind, replicas, desired)}
}

type deploymentRecord struct {
	record
	replicas                *int32
	strategy                appsv1.DeploymentStrategy
	minReadySeconds         int32
	revisionHistoryLimit    *int32
	paused                  bool
	progressDeadlineSeconds *int32
	status                  appsv1.DeploymentStatus
}

func (r *deploymentRecord) typed() appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: r.meta(), Spec: appsv1.DeploymentSpec{Replicas: r.replicas, Selector: r.selector,
		Template: r.template(), Strategy: r.strategy, MinReadySeconds: r.minReadySeconds, RevisionHistoryLimit: r.revisionHistoryLimit,
		Paused: r.paused, ProgressDeadlineSeconds: r.progressDeadlineSeconds}, Status: r.status}
}

// Into sets obj, a Deployment, to the one the record stands for.
func (r *deploymentRecord) Into(obj client.Object, deep bool) bool {
	return into(obj, r.typed(), appsv1.SchemeGroupVersion.WithKind("Deployment"), deep)
}

// Typed is the Deployment the record stands for.
func (r *deploymentRecord) Typed() client.Object {
	d := &appsv1.Deployment{}
	r.Into(d, false)
	return d
}

// DeepCopyObject implements runtime.Object.
func (r *deploymentRecord) DeepCopyObject() runtime.Object {
	t := r.typed()
	c, _ := Record(t.DeepCopy())
	return c.(runtime.Object)
}

func (r *deploymentRecord) metaOf() Meta {
	return r.record.metaOf(v1alpha1.KindDeployment, r.replicas, 0)
}

type statefulSetRecord struct {
	record
	replicas             *int32
	volumeClaimTemplates []corev1.PersistentVolumeClaim
	serviceName          string
	podManagementPolicy  appsv1.PodManagementPolicyType
	updateStrategy       appsv1.StatefulSetUpdateStrategy
	revisionHistoryLimit *int32
	minReadySeconds      int32
	retention            *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy
	ordinals             *appsv1.StatefulSetOrdinals
	status               appsv1.StatefulSetStatus
}

func (r *statefulSetRecord) typed() appsv1.StatefulSet {
	return appsv1.StatefulSet{ObjectMeta: r.meta(), Spec: appsv1.StatefulSetSpec{Replicas: r.replicas, Selector: r.selector,
		Template: r.template(), VolumeClaimTemplates: r.volumeClaimTemplates, ServiceName: r.serviceName,
		PodManagementPolicy: r.podManagementPolicy, UpdateStrategy: r.updateStrategy, RevisionHistoryLimit: r.revisionHistoryLimit,
		MinReadySeconds: r.minReadySeconds, PersistentVolumeClaimRetentionPolicy: r.retention, Ordinals: r.ordinals}, Status: r.status}
}

// Into sets obj, a StatefulSet, to the one the record stands for.
func (r *statefulSetRecord) Into(obj client.Object, deep bool) bool {
	return into(obj, r.typed(), appsv1.SchemeGroupVersion.WithKind("StatefulSet"), deep)
}

// Typed is the StatefulSet the record stands for.
func (r *statefulSetRecord) Typed() client.Object {
	s := &appsv1.StatefulSet{}
	r.Into(s, false)
	return s
}

// DeepCopyObject implements runtime.Object.
func (r *statefulSetRecord) DeepCopyObject() runtime.Object {
	t := r.typed()
	c, _ := Record(t.DeepCopy())
	return c.(runtime.Object)
}

func (r *statefulSetRecord) metaOf() Meta {
	return r.record.metaOf(v1alpha1.KindStatefulSet, r.replicas, 0)
}

type daemonSetRecord struct {
	record
	updateStrategy       appsv1.DaemonSetUpdateStrategy
	minReadySeconds      int32
	revisionHistoryLimit *int32
	status               appsv1.DaemonSetStatus
}

func (r *daemonSetRecord) typed() appsv1.DaemonSet {
	return appsv1.DaemonSet{ObjectMeta: r.meta(), Spec: appsv1.DaemonSetSpec{Selector: r.selector, Template: r.template(),
		UpdateStrategy: r.updateStrategy, MinReadySeconds: r.minReadySeconds, RevisionHistoryLimit: r.revisionHistoryLimit}, Status: r.status}
}

// Into sets obj, a DaemonSet, to the one the record stands for.
func (r *daemonSetRecord) Into(obj client.Object, deep bool) bool {
	return into(obj, r.typed(), appsv1.SchemeGroupVersion.WithKind("DaemonSet"), deep)
}

// Typed is the DaemonSet the record stands for.
func (r *daemonSetRecord) Typed() client.Object {
	d := &appsv1.DaemonSet{}
	r.Into(d, false)
	return d
}

// DeepCopyObject implements runtime.Object.
func (r *daemonSetRecord) DeepCopyObject() runtime.Object {
	t := r.typed()
	c, _ := Record(t.DeepCopy())
	return c.(runtime.Object)
}

func (r *daemonSetRecord) metaOf() Meta {
	return r.record.metaOf(v1alpha1.KindDaemonSet, nil, r.status.DesiredNumberScheduled)
}
