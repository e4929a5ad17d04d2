// Package informer is what holdfast keeps in its informer cache and how it reads it: the
// kinds it knows (NewScheme, which its clients and decoders share), objects trimmed to
// what decisions read, the objects of a workload indexed by their controller,
// and reads that hand out the cache's own objects instead of copies.
//
// Reads through Get, List and ListOwned return objects the cache and every other reader
// share: read them, never write them. Copying a workload's pods and revisions on every
// admission request would cost more than deciding it.
package informer

import (
	"context"
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// NewScheme knows the kinds holdfast's cache, clients and decoders read: kube's built-in
// kinds and holdfast's policies.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// OwnerIndex is the index of ReplicaSets, ControllerRevisions and pods by the UID of their
// controller.
const OwnerIndex = "holdfast.dev/controller-uid"

// The read-only options, built once: a variadic argument would be allocated per call.
// They are never written.
var (
	readOnlyGet  = []client.GetOption{client.UnsafeDisableDeepCopy}
	readOnlyList = []client.ListOption{client.UnsafeDisableDeepCopy}
	readOnly     = true
)

// Get reads an object from the cache without copying it.
func Get(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object) error {
	return r.Get(ctx, key, obj, readOnlyGet...)
}

// List lists objects from the cache without copying them.
func List(ctx context.Context, r client.Reader, list client.ObjectList) error {
	return r.List(ctx, list, readOnlyList...)
}

// ListIn lists the objects of one namespace, without copying them.
func ListIn(ctx context.Context, r client.Reader, list client.ObjectList, namespace string) error {
	return listWith(ctx, r, list, client.ListOptions{Namespace: namespace, UnsafeDisableDeepCopy: &readOnly})
}

// ListOwned lists the objects in namespace whose controller has the UID owner (by
// OwnerIndex), without copying them.
func ListOwned(ctx context.Context, r client.Reader, list client.ObjectList, namespace string, owner types.UID) error {
	return listWith(ctx, r, list, client.ListOptions{Namespace: namespace,
		FieldSelector: fields.OneTermEqualSelector(OwnerIndex, string(owner)), UnsafeDisableDeepCopy: &readOnly})
}

// listWith lists with opts, which escape to the heap with the variadic argument that holds
// them: one allocation for both.
func listWith(ctx context.Context, r client.Reader, list client.ObjectList, opts client.ListOptions) error {
	held := &struct {
		opts client.ListOptions
		arg  [1]client.ListOption
	}{opts: opts}
	held.arg[0] = &held.opts
	return r.List(ctx, list, held.arg[:]...)
}

// UIDIndex is the index of the objects that own pods (ReplicaSets, StatefulSets and
// DaemonSets) by their own UID: a pod read by owner finds the owner's selector through it.
const UIDIndex = "holdfast.dev/uid"

// IndexOwners adds OwnerIndex for the objects that make up a workload (its ReplicaSets,
// ControllerRevisions and pods), and UIDIndex for the objects that own pods.
func IndexOwners(ctx context.Context, idx client.FieldIndexer) error {
	for _, obj := range []client.Object{&appsv1.ReplicaSet{}, &appsv1.ControllerRevision{}, &corev1.Pod{}} {
		if err := idx.IndexField(ctx, obj, OwnerIndex, ControllerUID); err != nil {
			return fmt.Errorf("indexing %T by owner: %w", obj, err)
		}
	}
	for _, obj := range []client.Object{&appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		if err := idx.IndexField(ctx, obj, UIDIndex, ownUID); err != nil {
			return fmt.Errorf("indexing %T by UID: %w", obj, err)
		}
	}
	return nil
}

func ownUID(obj client.Object) []string { return []string{string(obj.GetUID())} }

// ListByUID lists the objects in namespace with the UID uid (by UIDIndex), without
// copying them.
func ListByUID(ctx context.Context, r client.Reader, list client.ObjectList, namespace string, uid types.UID) error {
	return listWith(ctx, r, list, client.ListOptions{Namespace: namespace,
		FieldSelector: fields.OneTermEqualSelector(UIDIndex, string(uid)), UnsafeDisableDeepCopy: &readOnly})
}

// ControllerUID is OwnerIndex's function: the UID of the object's controller.
func ControllerUID(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// Options trims what holdfast caches to what its decisions read: no managed fields and no
// kubectl apply's last-applied configuration anywhere, and pods reduced to identity,
// ownership, node and readiness. ReplicaSets and ControllerRevisions pass through revision
// after that, which may replace their pod templates by a fingerprint (history.Slim), and
// Deployments, StatefulSets and DaemonSets through template, which may pack theirs
// (workload.Pack). Of ConfigMaps, only holdfast's revision journals in its namespace are
// cached (journals selects them), and those that carry the same labels share one map of
// them (LabelSets). Of a workload's managed fields, writers keeps the manager that last
// changed its template (nil: none).
func Options(revision, template toolscache.TransformFunc, namespace string, journals labels.Selector, writers *Writers) crcache.Options {
	stripManaged := crcache.TransformStripManagedFields()
	strip := func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			if a := m.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
				// kubectl apply's copy of the whole object: no decision reads it.
				delete(a, corev1.LastAppliedConfigAnnotation)
			}
		}
		return stripManaged(obj)
	}
	stripThen := func(next toolscache.TransformFunc) toolscache.TransformFunc {
		return func(obj any) (any, error) {
			obj, err := strip(obj)
			if err != nil {
				return obj, err
			}
			return next(obj)
		}
	}
	stripThenTemplate := stripThen(template)
	recordStripPack := func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			writers.record(m)
		}
		return stripThenTemplate(obj)
	}
	stripThenRevision := stripThen(revision)
	sets := &LabelSets{}
	return crcache.Options{
		DefaultTransform: strip,
		ByObject: map[client.Object]crcache.ByObject{
			&corev1.Pod{}:                {Transform: LeanPod},
			&corev1.Node{}:               {Transform: leanNode},
			&appsv1.ReplicaSet{}:         {Transform: stripThenRevision},
			&appsv1.ControllerRevision{}: {Transform: stripThenRevision},
			&appsv1.Deployment{}:         {Transform: recordStripPack},
			&appsv1.StatefulSet{}:        {Transform: recordStripPack},
			&appsv1.DaemonSet{}:          {Transform: recordStripPack},
			&corev1.ConfigMap{}:          {Namespaces: map[string]crcache.Config{namespace: {}}, Label: journals, Transform: stripThen(sets.Share)},
		},
	}
}

// LabelSets hands the objects it is given that carry the same labels one map of them, the
// first it was given: every revision journal carries the same two labels, and a map costs
// about 300 bytes however few its entries (the cache's objects are read, never written).
// It keeps at most maxLabelSets sets; the zero LabelSets is ready.
type LabelSets struct {
	mu   sync.Mutex
	sets map[string]map[string]string
}

// maxLabelSets bounds a LabelSets: past it, it starts again empty.
const maxLabelSets = 64

// Share is a cache transform: it sets obj's labels to the map LabelSets holds for them.
func (s *LabelSets) Share(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok || len(m.GetLabels()) == 0 {
		return obj, nil
	}
	// Sorted, and unambiguous: a label's key holds no '=' nor ',', its value no ','.
	key := labels.Set(m.GetLabels()).String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.sets[key]; ok {
		m.SetLabels(shared)
		return obj, nil
	}
	if s.sets == nil || len(s.sets) >= maxLabelSets {
		s.sets = map[string]map[string]string{}
	}
	s.sets[key] = m.GetLabels()
	return obj, nil
}

// leanNode keeps of a node what decisions read: its name, labels and taints (which nodes
// a new DaemonSet runs on, workload.NodesFor) and when it joined (a DaemonSet's progress,
// history.Revision.ServingBefore).
func leanNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
		CreationTimestamp: n.CreationTimestamp},
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints}}, nil
}

// LeanPod keeps what decisions read of a pod; at 10,000 pods the rest is most of the cache.
func LeanPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: LeanPodMeta(p),
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: p.Status.Phase, Conditions: LeanPodConditions(p)},
	}, nil
}

// LeanPodMeta is what LeanPod keeps of a pod's metadata: its identity, labels, owners,
// age and deletion. It shares the pod's maps and slices.
func LeanPodMeta(p *corev1.Pod) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              p.Name,
		Namespace:         p.Namespace,
		UID:               p.UID,
		ResourceVersion:   p.ResourceVersion,
		Labels:            p.Labels,
		OwnerReferences:   p.OwnerReferences,
		CreationTimestamp: p.CreationTimestamp,
		DeletionTimestamp: p.DeletionTimestamp,
	}
}

// LeanPodConditions is what LeanPod keeps of a pod's conditions: its Ready condition's
// status and last transition, or none.
func LeanPodConditions(p *corev1.Pod) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out
}

// Direct reads the API server through r as holdfast's decisions read their cache: a list
// by OwnerIndex, which only the cache indexes, lists the namespace and keeps the objects
// whose controller has the UID. It is for tools that read a cluster once (holdfast check
// --cluster) and start no informers, so that they read through the webhook's own readers.
func Direct(r client.Reader) client.Reader { return direct{r} }

type direct struct{ client.Reader }

func (d direct) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	owner, indexed := "", false
	if o.FieldSelector != nil {
		owner, indexed = o.FieldSelector.RequiresExactMatch(OwnerIndex)
	}
	if !indexed {
		return d.Reader.List(ctx, list, opts...)
	}
	if reqs := o.FieldSelector.Requirements(); len(reqs) != 1 {
		return fmt.Errorf("listing by %s and other fields: only the cache indexes %s", o.FieldSelector, OwnerIndex)
	}
	o.FieldSelector = nil
	if err := d.Reader.List(ctx, list, o); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	owned := items[:0]
	for _, item := range items {
		if obj, ok := item.(client.Object); ok && slices.Contains(ControllerUID(obj), owner) {
			owned = append(owned, item)
		}
	}
	return meta.SetList(list, owned)
}

// informers is a reader that hands out the informer behind a kind: the cache itself, or a
// client that reads from it (WithInformers).
type informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error)
}

// stored is an informer whose store can be read in place (client-go's shared informers).
type stored interface{ GetStore() toolscache.Store }

// Each calls f with every object of obj's kind the cache holds, read-only (read it, never
// write it), without building a list: a list of tens of thousands of workloads holds a
// copy of each object's top-level struct (over a kilobyte each, a PodSpec included) until
// the walk ends, more than the cache itself costs when every request and reconcile of a
// fleet makes one. f is handed what the store holds: a Record where it holds one (read its
// metadata, or workload.MetaOf and Typed). A reader that is not an informer cache
// (a client of the API server, a test's store) is listed into list instead, and its items
// walked.
func Each(ctx context.Context, r client.Reader, obj client.Object, list client.ObjectList, f func(client.Object)) error {
	if ix, ok := r.(informers); ok {
		inf, err := synced(ctx, ix, obj)
		if err != nil {
			return err
		}
		if s, ok := inf.(stored); ok {
			walk(s.GetStore().List(), f)
			return nil
		}
	}
	return EachIn(ctx, r, list, "", f)
}

// synced is obj's informer in c, once it has synced. A cache not started yet adds the
// informer and returns it unsynced: walking its store would answer "none" where List
// answers an error.
func synced(ctx context.Context, c informers, obj client.Object) (crcache.Informer, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	if !inf.HasSynced() {
		return nil, &crcache.ErrCacheNotStarted{}
	}
	return inf, nil
}

// walk calls f with each of items that is an object.
func walk(items []any, f func(client.Object)) {
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			f(o)
		}
	}
}

// EachInNamespaces calls f with every object of obj's kind in the namespaces, read in place
// (as Each) from the informer's namespace index, which controller-runtime's informers keep:
// a walk of a few namespaces of a cluster of tens of thousands of workloads visits theirs
// alone. A reader that is not an informer cache, or an informer without the index, is
// read namespace by namespace (EachIn).
func EachInNamespaces(ctx context.Context, r client.Reader, obj client.Object, list client.ObjectList, namespaces []string, f func(client.Object)) error {
	if ix, ok := r.(informers); ok {
		inf, err := synced(ctx, ix, obj)
		if err != nil {
			return err
		}
		if s, ok := inf.(indexed); ok {
			if _, ok := s.GetIndexer().GetIndexers()[toolscache.NamespaceIndex]; ok {
				for _, ns := range namespaces {
					items, err := s.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
					if err != nil {
						return err
					}
					walk(items, f)
				}
				return nil
			}
		}
	}
	for _, ns := range namespaces {
		if err := EachIn(ctx, r, list, ns, f); err != nil {
			return err
		}
	}
	return nil
}

// EachIn calls f with every object of list's kind in namespace ("": every namespace),
// listed without a deep copy (ListIn), which still copies each object's top-level struct
// into the list: a read of one namespace, or of a reader that is not an informer cache.
func EachIn(ctx context.Context, r client.Reader, list client.ObjectList, namespace string, f func(client.Object)) error {
	var err error
	if namespace == "" {
		err = List(ctx, r, list) // its options held in a variable: no allocation
	} else {
		err = ListIn(ctx, r, list, namespace)
	}
	if err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			f(o)
		}
	}
	return nil
}

// WithInformers is a client whose reads come from cache (a manager's client) that also hands
// out cache's informers, so that Each walks their stores in place.
func WithInformers(c client.Client, cache crcache.Informers) client.Client {
	return withInformers{Client: c, informers: cache}
}

type withInformers struct {
	client.Client
	informers crcache.Informers
}

func (w withInformers) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	return w.informers.GetInformer(ctx, obj, opts...)
}
