package podscope

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// podRecord is how a watch holds a pod: what decisions read of it (informer.LeanPod's
// fields), without the rest of a corev1.Pod's struct. A Pod is 1,240 bytes with its spec
// and status inline, nearly all of them empty once a pod is made lean; a guarded cluster
// holds one per pod of its guarded workloads. Reads hand out corev1.Pods (fill), so that
// every decision reads a pod as it always has.
type podRecord struct {
	metav1.ObjectMeta
	NodeName string
	Phase    corev1.PodPhase
	// Conditions is the pod's Ready condition alone, or none.
	Conditions []corev1.PodCondition
}

// GetObjectKind implements runtime.Object: a record carries no kind.
func (r *podRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (r *podRecord) DeepCopyObject() runtime.Object {
	c := *r
	r.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Conditions = nil
	for i := range r.Conditions {
		c.Conditions = append(c.Conditions, *r.Conditions[i].DeepCopy())
	}
	return &c
}

// recordPod is the pod watches' transform: a pod becomes its record, its labels and owner
// references shared with the other pods of its controller that carry the same (sharing).
// A record passes unchanged (a transform may see an object twice: a first list streamed
// as a watch).
func (s *Scope) recordPod(obj any) (any, error) {
	r, err := recordPod(obj)
	if rec, ok := r.(*podRecord); ok && rec != obj {
		s.sharing.share(rec)
	}
	return r, err
}

func recordPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &podRecord{ObjectMeta: informer.LeanPodMeta(p), NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
		Conditions: informer.LeanPodConditions(p)}, nil
}

// fill sets pod to the record, as informer.LeanPod keeps a pod; deep copies what the
// record holds by reference (labels, owners), as a cache read that copies does.
func (r *podRecord) fill(pod *corev1.Pod, deep bool) {
	*pod = corev1.Pod{
		ObjectMeta: r.ObjectMeta,
		Spec:       corev1.PodSpec{NodeName: r.NodeName},
		Status:     corev1.PodStatus{Phase: r.Phase, Conditions: r.Conditions},
	}
	if deep {
		pod.Status = *pod.Status.DeepCopy()
		r.ObjectMeta.DeepCopyInto(&pod.ObjectMeta)
	}
}

// asPod is the pod a record stands for, for the handlers of the Scope's informer: they
// see corev1.Pods, as from any informer of pods. A tombstone's record is converted too.
func asPod(obj any) any {
	switch o := obj.(type) {
	case *podRecord:
		p := &corev1.Pod{}
		o.fill(p, false)
		return p
	case toolscache.DeletedFinalStateUnknown:
		o.Obj = asPod(o.Obj)
		return o
	}
	return obj
}

// sharing keeps, by controller UID, the labels and owner references the last pod of each
// controller arrived with: a workload's pods carry the same ones, and each copy is a map
// or a slice with its strings, a third of what a record costs. The cache's objects are
// read, never written, so its pods may share them. It forgets everything once it holds
// maxShared controllers, so that it holds no more than that of controllers gone; a pod
// keeps what it was given.
type sharing struct {
	mu sync.Mutex
	by map[types.UID]shared
}

type shared struct {
	labels map[string]string
	owners []metav1.OwnerReference
}

const maxShared = 1 << 14

func (s *sharing) share(r *podRecord) {
	ref := metav1.GetControllerOfNoCopy(r)
	if ref == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.by[ref.UID]; ok && maps.Equal(cur.labels, r.Labels) && sameOwners(cur.owners, r.OwnerReferences) {
		r.Labels, r.OwnerReferences = cur.labels, cur.owners
		return
	}
	if s.by == nil || len(s.by) >= maxShared {
		s.by = map[types.UID]shared{}
	}
	s.by[ref.UID] = shared{labels: r.Labels, owners: r.OwnerReferences}
}

func sameOwners(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			ptr.Equal(x.Controller, y.Controller) && ptr.Equal(x.BlockOwnerDeletion, y.BlockOwnerDeletion)
	})
}
