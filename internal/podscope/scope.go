package podscope

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Scope is holdfast's cache of the guarded workloads' pods, ReplicaSets and
// ControllerRevisions: the watches of the current plan, each a cache of its own started and
// stopped as the plan changes. A watch whose spec changes is replaced by a new one, and the
// old one serves what it covers until the new one has synced. The Scope is its pods'
// informer.
type Scope struct {
	kindInformer
	cfg     *rest.Config
	base    crcache.Options
	metrics *Metrics
	// owners reads the StatefulSets and DaemonSets whose pods are read by owner, for their
	// selectors (informer.UIDIndex); live reads the API server.
	owners client.Reader
	live   client.Reader
	// scoped is which kinds the Scope holds: pods always, ReplicaSets and ControllerRevisions
	// when the manager's cache is built by NewCache (with transforms, the manager's).
	scoped     [kindCount]bool
	transforms [kindCount]toolscache.TransformFunc
	sharing    sharing

	mu       sync.RWMutex
	watches  map[string]*watch // by Spec.Name
	regs     []*registration
	indexers [kindCount]map[string]client.IndexerFunc
	// guarded are the selectors of the plan's workloads, by UID: a list of a workload's
	// ReplicaSets or ControllerRevisions by owner is served by the watch that covers them.
	guarded map[types.UID]labels.Selector
	ctx     context.Context // the scope's lifetime, once started
	liveMu  sync.Mutex
	lives   map[string]liveList // recent live lists, by namespace and selector

	// planned is closed once a plan has been applied and every watch of it has synced
	// (Ready); applied is whether a plan has been.
	planned     chan struct{}
	plannedOnce sync.Once
	applied     bool

	// again is signalled when a plan Apply held back can be applied (Again); held is
	// whether the last Apply held one back, and resume the timer that ends its patience.
	again    chan struct{}
	held     bool
	resume   *time.Timer
	patience time.Duration // Patience
}

// Patience is how long a widened or narrowed watch still syncing is left to sync before a
// later plan of the same watch replaces it. A plan that changes every few hundred
// milliseconds (a fleet relabelled into a selection, one workload after another) would
// otherwise restart, each time, a watch that lists every pod it covers, so that it never
// syncs and every list is the API server's work for nothing. Past Patience the latest
// plan replaces it as before: a watch that cannot sync (its list refused) holds up no plan
// for longer.
const Patience = time.Minute

// watch is one started cache of the plan, and the one that will replace it.
type watch struct {
	spec    Spec
	cache   crcache.Cache
	inf     [kindCount]crcache.Informer // nil for a kind the Scope does not hold
	ctx     context.Context             // ends when the watch is stopped
	cancel  context.CancelFunc
	started time.Time
	// unsyncedSince is when the watches it replaces began syncing, when none of them had
	// synced (a plan that keeps changing a watch that cannot sync): started otherwise.
	unsyncedSince time.Time
	synced        chan struct{}
	next          *watch
	regs          map[*registration]toolscache.ResourceEventHandlerRegistration
}

func (w *watch) isSynced() bool {
	select {
	case <-w.synced:
		return true
	default:
		return false
	}
}

// running lists every started watch: each current one and the successor it waits for. The
// caller holds mu.
func (s *Scope) running() []*watch {
	out := make([]*watch, 0, 2*len(s.watches))
	for _, cur := range s.watches {
		out = append(out, cur)
		if cur.next != nil {
			out = append(out, cur.next)
		}
	}
	return out
}

// Kinds the Scope holds. A workload's ReplicaSets and ControllerRevisions carry its pod
// template's labels, which its selector matches (kube's Deployment controller labels a
// ReplicaSet with its template's, history.NewControllerRevision a revision likewise), so
// the watch that holds a guarded workload's pods holds them too.
const (
	kindPod = iota
	kindReplicaSet
	kindRevision
	kindCount
)

// kinds are the resource, kind and new objects of each kind the Scope holds.
var kinds = [kindCount]struct {
	resource string
	gvk      schema.GroupVersionKind
	object   func() client.Object
	list     func() client.ObjectList
}{
	kindPod: {"pods", corev1.SchemeGroupVersion.WithKind("Pod"),
		func() client.Object { return &corev1.Pod{} }, func() client.ObjectList { return &corev1.PodList{} }},
	kindReplicaSet: {"replicasets", appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		func() client.Object { return &appsv1.ReplicaSet{} }, func() client.ObjectList { return &appsv1.ReplicaSetList{} }},
	kindRevision: {"controllerrevisions", appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
		func() client.Object { return &appsv1.ControllerRevision{} }, func() client.ObjectList { return &appsv1.ControllerRevisionList{} }},
}

// kindOf is the kind of an object or list the Scope may hold.
func kindOf(obj any) (int, bool) {
	switch obj.(type) {
	case *corev1.Pod, *corev1.PodList:
		return kindPod, true
	case *appsv1.ReplicaSet, *appsv1.ReplicaSetList:
		return kindReplicaSet, true
	case *appsv1.ControllerRevision, *appsv1.ControllerRevisionList:
		return kindRevision, true
	}
	return 0, false
}

// holds is the kind of obj when the Scope holds it.
func (s *Scope) holds(obj any) (int, bool) {
	k, ok := kindOf(obj)
	return k, ok && s.scoped[k]
}

// New returns a Scope that watches nothing until its first plan. metrics may be nil.
func New(metrics *Metrics) *Scope {
	s := &Scope{metrics: metrics, watches: map[string]*watch{}, planned: make(chan struct{}), again: make(chan struct{}, 1), patience: Patience}
	if metrics != nil {
		metrics.scope.Store(s)
	}
	s.kindInformer = kindInformer{s: s, kind: kindPod}
	s.scoped[kindPod] = true
	s.transforms[kindPod] = s.recordPod
	return s
}

// NewCache is the manager's NewCache: its cache, with pods, ReplicaSets and
// ControllerRevisions read through the Scope (with the transforms opts gives them) and the
// indexes by UID kept once (informer.UIDIndexes), each informer's handlers behind one
// registration (informer.FanOut), and workloads read from their records (informer.Records).
// It keeps the manager's configuration, scheme, mapper and HTTP client for the Scope's
// watches.
func (s *Scope) NewCache(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	for obj, by := range opts.ByObject {
		if k, ok := kindOf(obj); ok && k != kindPod {
			s.scoped[k], s.transforms[k] = true, by.Transform
		}
	}
	c, err := crcache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	inner := informer.Records(informer.UIDIndexes(informer.FanOut(c)))
	s.cfg = cfg
	s.base = crcache.Options{Scheme: opts.Scheme, Mapper: opts.Mapper, HTTPClient: opts.HTTPClient}
	s.owners = inner
	return &Cache{Cache: inner, scope: s}, nil
}

// setGuarded keeps the plan's workloads' selectors by UID.
func (s *Scope) setGuarded(guarded []Guarded) {
	by := make(map[types.UID]labels.Selector, len(guarded))
	for _, g := range guarded {
		if g.UID != "" {
			by[g.UID] = g.Selector
		}
	}
	s.mu.Lock()
	s.guarded = by
	s.mu.Unlock()
}

// SetLive sets the reader of the API server that answers the reads no watch covers.
func (s *Scope) SetLive(r client.Reader) { s.live = r }

// Ready is nil once a plan has been applied and each of its watches has synced. It never
// fails again: a watch that syncs later (a widened scope) leaves its reads to the API
// server meanwhile.
func (s *Scope) Ready() error {
	select {
	case <-s.planned:
		return nil
	default:
	}
	s.mu.RLock()
	ready := s.applied
	for _, cur := range s.watches {
		if !cur.isSynced() && (cur.next == nil || !cur.next.isSynced()) {
			ready = false
		}
	}
	s.mu.RUnlock()
	if !ready {
		return errors.New("the pods of the guarded workloads have not been read yet")
	}
	s.plannedOnce.Do(func() { close(s.planned) })
	return nil
}

// Apply replaces the plan: it starts the watches of specs that are new or changed and stops
// the others. A changed watch whose successor is still syncing, for less than Patience, is
// left to it: the plan is held back and Again signals when it can be applied (the
// successor has synced, or its patience has run out). It must follow Start.
func (s *Scope) Apply(specs []Spec, log logr.Logger) {
	defer func() { _ = s.Ready() }() // after the unlock: a plan of no watches is ready at once
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return
	}
	want := map[string]Spec{}
	var pending []*watch
	now := time.Now()
	var wait time.Duration // until the first held-back successor's patience runs out
	s.held = false
	for _, sp := range specs {
		want[sp.Name()] = sp
		cur := s.watches[sp.Name()]
		switch {
		case cur != nil && cur.next == nil && cur.spec.Equal(sp):
			continue
		case cur != nil && cur.next != nil && cur.next.spec.Equal(sp):
			if cur.next.isSynced() {
				s.promoteLocked(cur.next)
			}
			continue
		case cur != nil && cur.next != nil && cur.spec.Equal(sp):
			// Back to what the current watch selects: its pending successor is not needed.
			cur.next.stop()
			cur.next = nil
			continue
		case cur != nil && cur.next != nil && now.Sub(cur.next.started) < s.patience:
			// Changed again while its successor syncs: the successor is let finish, and the
			// plan is applied once it has. Meanwhile what neither covers is read live.
			left := s.patience - now.Sub(cur.next.started)
			if !s.held || left < wait {
				wait = left
			}
			s.held = true
			continue
		}
		w, err := s.start(sp)
		if err != nil {
			log.Error(err, "Starting a pod watch; its pods are read from the API server", "watch", sp.String())
			continue
		}
		log.Info("Watching pods", "watch", sp.String())
		for _, old := range []*watch{cur, nextOf(cur)} {
			if old != nil && !old.isSynced() && old.unsyncedSince.Before(w.unsyncedSince) {
				w.unsyncedSince = old.unsyncedSince
			}
		}
		if cur == nil {
			s.watches[sp.Name()] = w
		} else {
			if cur.next != nil {
				cur.next.stop()
			}
			cur.next = w
		}
		pending = append(pending, w)
	}
	for name, cur := range s.watches {
		if _, ok := want[name]; !ok {
			log.Info("No longer watching pods", "watch", cur.spec.String())
			cur.stop()
			if cur.next != nil {
				cur.next.stop()
			}
			delete(s.watches, name)
		}
	}
	s.metrics.watches(len(s.watches))
	s.applied = true
	for _, w := range pending {
		go s.promote(w)
	}
	if s.resume != nil {
		s.resume.Stop()
		s.resume = nil
	}
	if s.held {
		s.resume = time.AfterFunc(wait, s.signalAgain)
	}
}

// Again is signalled when a plan that Apply held back can be applied: a successor it waited
// for has synced, or its patience has run out. The planner plans again then.
func (s *Scope) Again() <-chan struct{} { return s.again }

func (s *Scope) signalAgain() {
	select {
	case s.again <- struct{}{}:
	default:
	}
}

// start starts a watch for spec; the caller holds mu.
func (s *Scope) start(sp Spec) (*watch, error) {
	opts := s.base
	opts.ByObject = map[client.Object]crcache.ByObject{}
	// A namespace's watch selects its namespace by field, not as the cache's namespace: a
	// cache of namespaces keeps one informer per namespace behind one without a store,
	// which the pods' records and the UID indexes are read from.
	var field fields.Selector
	if sp.Key == "" && sp.Namespace != "" {
		field = fields.OneTermEqualSelector("metadata.namespace", sp.Namespace)
	}
	for k := range kindCount {
		if s.scoped[k] {
			opts.ByObject[kinds[k].object()] = crcache.ByObject{Transform: s.transforms[k], Label: sp.Selector(), Field: field}
		}
	}
	raw, err := crcache.New(s.cfg, opts)
	if err != nil {
		return nil, err
	}
	c := informer.UIDIndexes(informer.FanOut(raw))
	ctx, cancel := context.WithCancel(s.ctx)
	now := time.Now()
	w := &watch{spec: sp, cache: c, ctx: ctx, cancel: cancel, started: now, unsyncedSince: now, synced: make(chan struct{}),
		regs: map[*registration]toolscache.ResourceEventHandlerRegistration{}}
	var syncs []toolscache.InformerSynced
	for k := range kindCount {
		if !s.scoped[k] {
			continue
		}
		if k != kindPod {
			for name, fn := range s.indexers[k] {
				if err := c.IndexField(ctx, kinds[k].object(), name, fn); err != nil {
					cancel()
					return nil, err
				}
			}
		}
		inf, err := c.GetInformer(ctx, kinds[k].object(), crcache.BlockUntilSynced(false))
		if err != nil {
			cancel()
			return nil, err
		}
		if k == kindPod {
			// The pods are records (podRecord), read here rather than through the cache:
			// their indexes are keyed by their values alone (UIDs, unique in the cluster).
			for name, fn := range s.indexers[k] {
				if err := inf.AddIndexers(toolscache.Indexers{name: func(o any) ([]string, error) {
					co, ok := o.(client.Object)
					if !ok {
						return nil, fmt.Errorf("object of type %T is not an Object", o)
					}
					return fn(co), nil
				}}); err != nil {
					cancel()
					return nil, err
				}
			}
		}
		w.inf[k] = inf
		syncs = append(syncs, inf.HasSynced)
	}
	for _, r := range s.regs {
		r.attach(w)
	}
	go func() { _ = c.Start(ctx) }()
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), syncs...) {
			s.metrics.synced(time.Since(w.started))
			close(w.synced)
		}
	}()
	return w, nil
}

func (w *watch) stop() { w.cancel() }

// nextOf is w's successor; nil when w is nil or has none.
func nextOf(w *watch) *watch {
	if w == nil {
		return nil
	}
	return w.next
}

// promote puts w in the place of the watch it replaces once it has synced; a watch stopped
// before it synced (the plan changed again) is given up.
func (s *Scope) promote(w *watch) {
	select {
	case <-w.synced:
	case <-w.ctx.Done():
		return
	}
	s.mu.Lock()
	s.promoteLocked(w)
	held := s.held
	s.mu.Unlock()
	_ = s.Ready() // the plan may be complete now
	if held {
		s.signalAgain()
	}
}

// promoteLocked replaces, by w, the current watch of w's name if w is its successor; the
// caller holds mu.
func (s *Scope) promoteLocked(w *watch) {
	if cur := s.watches[w.spec.Name()]; cur != nil && cur.next == w {
		cur.stop()
		s.watches[w.spec.Name()] = w
	}
}

// serving is the synced watch that covers the objects in namespace sel selects, or nil.
func (s *Scope) serving(namespace string, sel labels.Selector) *watch {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, w := range s.running() {
		if w.isSynced() && w.spec.Covers(namespace, sel) {
			return w
		}
	}
	return nil
}

// synced lists the synced watches.
func (s *Scope) synced() []*watch {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*watch
	for _, w := range s.running() {
		if w.isSynced() {
			out = append(out, w)
		}
	}
	return out
}

// pods is the store of the watch's pod records.
func (w *watch) pods() (toolscache.Indexer, error) {
	if ix, ok := w.inf[kindPod].(interface{ GetIndexer() toolscache.Indexer }); ok {
		return ix.GetIndexer(), nil
	}
	return nil, fmt.Errorf("the pod watch %s has no store", w.spec)
}

// getPod reads the pod key from the watch's records; false when it holds none.
func (w *watch) getPod(key client.ObjectKey, pod *corev1.Pod, deep bool) bool {
	store, err := w.pods()
	if err != nil {
		return false
	}
	item, ok, err := store.GetByKey(key.String()) // namespace/name, as the store keys pods
	r, isRecord := item.(*podRecord)
	if err != nil || !ok || !isRecord {
		return false
	}
	r.fill(pod, deep)
	return true
}

// listPods lists the watch's pods as o asks: by owner (the UID owner, when byOwner), in
// o.Namespace, matching o.LabelSelector.
func (w *watch) listPods(list *corev1.PodList, o *client.ListOptions, owner string, byOwner bool) error {
	store, err := w.pods()
	if err != nil {
		return err
	}
	var items []any
	switch {
	case byOwner:
		items, err = store.ByIndex(informer.OwnerIndex, owner)
	case o.Namespace != "":
		items, err = store.ByIndex(toolscache.NamespaceIndex, o.Namespace)
	default:
		items = store.List()
	}
	if err != nil {
		return err
	}
	deep := o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
	list.Items = make([]corev1.Pod, 0, len(items))
	for _, item := range items {
		r, ok := item.(*podRecord)
		if !ok || !informer.Selects(o, r) {
			continue
		}
		list.Items = append(list.Items, corev1.Pod{})
		r.fill(&list.Items[len(list.Items)-1], deep)
	}
	return nil
}

// deepRead is whether a read copies what it hands out (the cache's default).
func deepRead(opts []client.GetOption) bool {
	o := client.GetOptions{}
	o.ApplyOptions(opts)
	return o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
}

// get reads an object from a synced watch. A pod no watch holds is NotFound (the eviction
// guard then asks the API server); a ReplicaSet or ControllerRevision is read from the API
// server: its reader (a pod's owner, read by name) cannot tell "outside the scope" from
// "gone".
func (s *Scope) get(ctx context.Context, k int, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if pod, ok := obj.(*corev1.Pod); ok {
		deep := deepRead(opts)
		for _, w := range s.synced() {
			if w.getPod(key, pod, deep) {
				return nil
			}
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: kinds[k].resource}, key.Name)
	}
	for _, w := range s.synced() {
		err := w.cache.Get(ctx, key, obj, opts...)
		if err == nil || !apierrors.IsNotFound(err) {
			return err
		}
	}
	if s.live == nil {
		return errNoLive(k)
	}
	s.metrics.liveRead(k, ReasonOutside)
	ctx, cancel := informer.BoundLive(ctx)
	defer cancel()
	return s.live.Get(ctx, key, obj)
}

// errNoLive is the answer to a read no watch covers when the Scope has no reader of the
// API server.
func errNoLive(k int) error {
	return fmt.Errorf("the %s are outside holdfast's cache and it has no reader of the API server", kinds[k].resource)
}

// list lists objects from the watch that covers the list, or from the API server.
func (s *Scope) list(ctx context.Context, k int, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	sel, liveSel := o.LabelSelector, o.LabelSelector
	owner, byOwner := "", false
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		if _, byUID := o.FieldSelector.RequiresExactMatch(informer.UIDIndex); byUID && k != kindPod && len(o.FieldSelector.Requirements()) == 1 {
			return s.listByUID(ctx, k, list, opts...)
		}
		if owner, byOwner = o.FieldSelector.RequiresExactMatch(informer.OwnerIndex); !byOwner || len(o.FieldSelector.Requirements()) != 1 {
			return fmt.Errorf("%s are read by owner (%s) or by labels, not by field selector %q", kinds[k].resource, informer.OwnerIndex, o.FieldSelector)
		}
	}
	if byOwner && (sel == nil || sel.Empty()) {
		var err error
		if sel, liveSel, err = s.ownerSelector(ctx, k, o.Namespace, types.UID(owner)); err != nil {
			return err
		}
	}
	if w := s.serving(o.Namespace, sel); w != nil {
		if l, ok := list.(*corev1.PodList); ok {
			return w.listPods(l, o, owner, byOwner)
		}
		return w.cache.List(ctx, list, opts...)
	}
	if s.live == nil {
		return errNoLive(k)
	}
	reason := ReasonOutside
	if sel == nil {
		reason = ReasonOwnerUnknown
	}
	got, err := s.liveList(ctx, k, o.Namespace, liveSel, reason)
	if err != nil {
		return err
	}
	// The owner is filtered here, as the cache's index does.
	switch l := list.(type) {
	case *corev1.PodList:
		l.Items = ownedBy(got.(*corev1.PodList).Items, l.Items[:0], byOwner, owner)
	case *appsv1.ReplicaSetList:
		l.Items = ownedBy(got.(*appsv1.ReplicaSetList).Items, l.Items[:0], byOwner, owner)
	case *appsv1.ControllerRevisionList:
		l.Items = ownedBy(got.(*appsv1.ControllerRevisionList).Items, l.Items[:0], byOwner, owner)
	}
	return nil
}

// ownedBy appends to dst the items of src whose controller has the UID owner, or every item
// when not byOwner.
func ownedBy[T any, P interface {
	*T
	metav1.Object
}](src, dst []T, byOwner bool, owner string) []T {
	for i := range src {
		if ref := metav1.GetControllerOfNoCopy(P(&src[i])); !byOwner || (ref != nil && string(ref.UID) == owner) {
			dst = append(dst, src[i])
		}
	}
	return dst
}

// listByUID lists the ReplicaSet (or ControllerRevision) of a UID from the synced watch
// that holds it, or from a list read from the API server within liveTTL (a pod read by an
// owner that was itself read live); none found is an empty list, which the reader (a pod
// read by owner) takes as an owner it does not know.
func (s *Scope) listByUID(ctx context.Context, k int, list client.ObjectList, opts ...client.ListOption) error {
	for _, w := range s.synced() {
		if err := w.cache.List(ctx, list, opts...); err != nil || apimeta.LenList(list) > 0 {
			return err
		}
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	uid, _ := o.FieldSelector.RequiresExactMatch(informer.UIDIndex)
	now := time.Now()
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	for _, l := range s.lives {
		if l.kind != k || now.Sub(l.at) >= liveTTL {
			continue
		}
		items, _ := apimeta.ExtractListWithAlloc(l.list)
		for _, item := range items {
			if obj, ok := item.(client.Object); ok && string(obj.GetUID()) == uid && (o.Namespace == "" || obj.GetNamespace() == o.Namespace) {
				return apimeta.SetList(list, []runtime.Object{obj})
			}
		}
	}
	return nil
}

// liveTTL is how long a live list answers the reads of the same selector: a Deployment's
// pods are read once per ReplicaSet, and one list of its selector answers them all.
const liveTTL = time.Second

type liveList struct {
	kind int
	at   time.Time
	list client.ObjectList
}

// liveList lists the objects of kind k sel selects in namespace from the API server, or
// returns the list of the same selector read within liveTTL. Its items are shared: read
// them, never write them.
func (s *Scope) liveList(ctx context.Context, k int, namespace string, sel labels.Selector, reason string) (client.ObjectList, error) {
	key := kinds[k].resource + "\x00" + namespace + "\x00"
	if sel != nil {
		key += sel.String()
	}
	now := time.Now()
	s.liveMu.Lock()
	if l, ok := s.lives[key]; ok && now.Sub(l.at) < liveTTL {
		s.liveMu.Unlock()
		return l.list, nil
	}
	s.liveMu.Unlock()
	s.metrics.liveRead(k, reason)
	list := kinds[k].list()
	ctx, cancel := informer.BoundLive(ctx)
	defer cancel()
	if err := s.live.List(ctx, list, &client.ListOptions{Namespace: namespace, LabelSelector: sel}); err != nil {
		return nil, err
	}
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.lives == nil {
		s.lives = map[string]liveList{}
	}
	for k, l := range s.lives {
		if now.Sub(l.at) >= liveTTL {
			delete(s.lives, k)
		}
	}
	s.lives[key] = liveList{kind: k, at: now, list: list}
	return list, nil
}

// ownerSelector is the selector of the owner with this UID of the objects of kind k: every
// object it keeps matches it (kube's controllers release those that do not). For pods, the
// ReplicaSet, StatefulSet or DaemonSet of the UID as the caches hold it; for ReplicaSets and
// ControllerRevisions, the plan's workload of the UID, else the StatefulSet or DaemonSet as
// the cache holds it. Nil when neither holds such an owner. live is what to list the API
// server by: a ReplicaSet's Deployment's selector, so that one list answers all its
// ReplicaSets.
func (s *Scope) ownerSelector(ctx context.Context, k int, namespace string, uid types.UID) (sel, live labels.Selector, err error) {
	if k != kindPod {
		s.mu.RLock()
		sel = s.guarded[uid]
		s.mu.RUnlock()
		if sel == nil && k == kindReplicaSet {
			sel = s.deploymentSelector(ctx, namespace, uid)
		}
		if sel != nil || k == kindReplicaSet {
			return sel, sel, nil // a Deployment's selector is the plan's, the cache's, or unknown
		}
	}
	for _, list := range ownerLists(k) {
		var err error
		if _, ok := list.(*appsv1.ReplicaSetList); ok && s.scoped[kindReplicaSet] {
			err = s.listByUID(ctx, kindReplicaSet, list, client.InNamespace(namespace),
				client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(informer.UIDIndex, string(uid))})
		} else {
			err = informer.ListByUID(ctx, s.owners, list, namespace, uid)
		}
		if err != nil {
			return nil, nil, err
		}
		if sel = selectorOf(list); sel == nil {
			continue
		}
		live = sel
		if rs, ok := list.(*appsv1.ReplicaSetList); ok {
			if ref := metav1.GetControllerOfNoCopy(&rs.Items[0]); ref != nil && ref.Kind == "Deployment" {
				if dsel := s.selectorOfDeployment(ctx, namespace, ref.Name, ref.UID); dsel != nil {
					live = dsel
				}
			}
		}
		return sel, live, nil
	}
	return nil, nil, nil
}

// deploymentSelector is the selector of the Deployment with this UID in namespace as the
// cache holds it, nil when it holds none: a Deployment the plan does not have (entering a
// selection, or no policy's) has its ReplicaSets read by it, as kube's controller claims
// them (it releases those its selector, immutable, does not match), rather than its
// namespace's every ReplicaSet, megabytes in a namespace of hundreds of workloads. The
// walk is of the store in place.
func (s *Scope) deploymentSelector(ctx context.Context, namespace string, uid types.UID) labels.Selector {
	if s.owners == nil {
		return nil
	}
	name := ""
	err := informer.Each(ctx, s.owners, &appsv1.Deployment{}, &appsv1.DeploymentList{}, func(o client.Object) {
		if o.GetUID() == uid && o.GetNamespace() == namespace {
			name = o.GetName()
		}
	})
	if err != nil || name == "" {
		return nil
	}
	return s.selectorOfDeployment(ctx, namespace, name, uid)
}

// selectorOfDeployment is the selector of the Deployment namespace/name as the cache holds
// it, when it has this UID; nil otherwise.
func (s *Scope) selectorOfDeployment(ctx context.Context, namespace, name string, uid types.UID) labels.Selector {
	d := &appsv1.Deployment{}
	if err := informer.Get(ctx, s.owners, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil || d.UID != uid {
		return nil
	}
	return parseSelector(d.Spec.Selector)
}

// Reasons a pod read went to the API server.
const (
	// ReasonOutside: no synced watch covers the read (a workload entering a selection, a
	// watch syncing after the scope widened, a workload no policy guards).
	ReasonOutside = "outside-scope"
	// ReasonOwnerUnknown: a read by an owner the cache does not hold yet.
	ReasonOwnerUnknown = "owner-unknown"
)

// Metrics are the pod scope's: its watches, their sync times, how long one has been
// syncing, and the reads they did not cover.
type Metrics struct {
	watchCount    prometheus.Gauge
	syncTime      prometheus.Histogram
	unsynced      prometheus.GaugeFunc
	live          *prometheus.CounterVec
	revisionsLive *prometheus.CounterVec
	// scope is the Scope whose watches unsynced reads (New sets it).
	scope atomic.Pointer[Scope]
}

// NewMetrics registers the pod scope's metrics.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		watchCount: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holdfast_pod_watches",
			Help: "Pod watches the guarded workloads' selectors are planned into; holdfast caches only their pods.",
		}),
		syncTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "holdfast_pod_watch_sync_seconds",
			Help:    "How long a new or changed pod watch took to sync; its pods are read from the API server meanwhile.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		live: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_pod_live_reads_total",
			Help: "Pod lists read from the API server because no synced pod watch covers them, by reason.",
		}, []string{"reason"}),
		revisionsLive: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_revision_live_reads_total",
			Help: "ReplicaSet and ControllerRevision reads (lists, and gets by name) from the API server because no synced watch holds them, by kind and reason.",
		}, []string{"kind", "reason"}),
	}
	m.unsynced = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "holdfast_pod_watch_unsynced_seconds",
		Help: "How long the pod watch of the plan that has been syncing longest has been at it; 0 when every one has synced. The pods only it covers are read from the API server meanwhile.",
	}, func() float64 {
		if s := m.scope.Load(); s != nil {
			return s.unsyncedFor(time.Now()).Seconds()
		}
		return 0
	})
	for _, c := range []prometheus.Collector{m.watchCount, m.syncTime, m.unsynced, m.live, m.revisionsLive} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) watches(n int) {
	if m != nil {
		m.watchCount.Set(float64(n))
	}
}

func (m *Metrics) synced(d time.Duration) {
	if m != nil {
		m.syncTime.Observe(d.Seconds())
	}
}

func (m *Metrics) liveRead(k int, reason string) {
	switch {
	case m == nil:
	case k == kindPod:
		m.live.WithLabelValues(reason).Inc()
	default:
		m.revisionsLive.WithLabelValues(kinds[k].resource, reason).Inc()
	}
}

// unsyncedFor is how long, at now, the watch of the plan that has been syncing longest has
// been at it (a plan's new watch, or the successor of a changed one, since the first of the
// unsynced ones it replaced began); 0 when every one has synced.
func (s *Scope) unsyncedFor(now time.Time) time.Duration {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var longest time.Duration
	for _, w := range s.running() {
		if !w.isSynced() {
			longest = max(longest, now.Sub(w.unsyncedSince))
		}
	}
	return longest
}

// Watching lists the synced watches, as Spec.String names them.
func (s *Scope) Watching() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, w := range s.running() {
		if w.isSynced() {
			out = append(out, w.spec.String())
		}
	}
	slices.Sort(out)
	return out
}

// Holds reports whether a synced watch holds the pod key.
func (s *Scope) Holds(ctx context.Context, key client.ObjectKey) bool {
	return s.get(ctx, kindPod, key, &corev1.Pod{}) == nil
}

// HoldsObject reports whether a synced watch holds obj (a pod, ReplicaSet or
// ControllerRevision, by its key): whether holdfast reads it from its cache.
func (s *Scope) HoldsObject(ctx context.Context, obj client.Object) bool {
	k, ok := s.holds(obj)
	if !ok {
		return false
	}
	key := client.ObjectKeyFromObject(obj)
	for _, w := range s.synced() {
		if k == kindPod && w.getPod(key, &corev1.Pod{}, false) || k != kindPod && w.cache.Get(ctx, key, kinds[k].object()) == nil {
			return true
		}
	}
	return false
}

// Covered reports whether a synced watch covers the pods in namespace that sel selects:
// whether holdfast reads them from its cache rather than from the API server.
func (s *Scope) Covered(namespace string, sel labels.Selector) bool {
	return s.serving(namespace, sel) != nil
}
