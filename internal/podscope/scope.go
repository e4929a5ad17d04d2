package podscope

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Scope is holdfast's pod cache: the watches of the current plan, each a cache of its own
// started and stopped as the plan changes. A watch whose spec changes is replaced by a new
// one, and the old one serves what it covers until the new one has synced.
type Scope struct {
	cfg     *rest.Config
	base    crcache.Options
	metrics *Metrics
	// owners reads the workloads and ReplicaSets whose pods are read by owner, for their
	// selectors (informer.UIDIndex); live reads the API server.
	owners client.Reader
	live   client.Reader

	mu       sync.RWMutex
	watches  map[string]*watch // by Spec.Name
	regs     []*registration
	indexers map[string]client.IndexerFunc
	ctx      context.Context // the scope's lifetime, once started
	liveMu   sync.Mutex
	lives    map[string]liveList // recent live lists, by namespace and selector

	// planned is closed once a plan has been applied and every watch of it has synced
	// (Ready); applied is whether a plan has been.
	planned     chan struct{}
	plannedOnce sync.Once
	applied     bool
}

// watch is one started cache of the plan, and the one that will replace it.
type watch struct {
	spec    Spec
	cache   crcache.Cache
	inf     crcache.Informer
	ctx     context.Context // ends when the watch is stopped
	cancel  context.CancelFunc
	started time.Time
	synced  chan struct{}
	next    *watch
	regs    map[*registration]toolscache.ResourceEventHandlerRegistration
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

// New returns a Scope that watches nothing until its first plan. metrics may be nil.
func New(metrics *Metrics) *Scope {
	return &Scope{metrics: metrics, watches: map[string]*watch{}, indexers: map[string]client.IndexerFunc{},
		planned: make(chan struct{})}
}

// NewCache is the manager's NewCache: its cache, with pods read through the Scope and the
// indexes by UID kept once (informer.UIDIndexes). It keeps
// the manager's configuration, scheme, mapper and HTTP client for the pod watches.
func (s *Scope) NewCache(cfg *rest.Config, opts crcache.Options) (crcache.Cache, error) {
	c, err := crcache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	inner := informer.UIDIndexes(c)
	s.cfg = cfg
	s.base = crcache.Options{Scheme: opts.Scheme, Mapper: opts.Mapper, HTTPClient: opts.HTTPClient}
	s.owners = inner
	return &Cache{Cache: inner, scope: s}, nil
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
// the others. It must follow Start.
func (s *Scope) Apply(specs []Spec, log logr.Logger) {
	defer func() { _ = s.Ready() }() // after the unlock: a plan of no watches is ready at once
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return
	}
	want := map[string]Spec{}
	var pending []*watch
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
		}
		w, err := s.start(sp)
		if err != nil {
			log.Error(err, "Starting a pod watch; its pods are read from the API server", "watch", sp.String())
			continue
		}
		log.Info("Watching pods", "watch", sp.String())
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
}

// start starts a watch for spec; the caller holds mu.
func (s *Scope) start(sp Spec) (*watch, error) {
	opts := s.base
	opts.ByObject = map[client.Object]crcache.ByObject{&corev1.Pod{}: {Transform: informer.LeanPod, Label: sp.Selector()}}
	if sp.Key == "" && sp.Namespace != "" {
		opts.DefaultNamespaces = map[string]crcache.Config{sp.Namespace: {}}
	}
	c, err := crcache.New(s.cfg, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	for name, fn := range s.indexers {
		if err := c.IndexField(ctx, &corev1.Pod{}, name, fn); err != nil {
			cancel()
			return nil, err
		}
	}
	inf, err := c.GetInformer(ctx, &corev1.Pod{}, crcache.BlockUntilSynced(false))
	if err != nil {
		cancel()
		return nil, err
	}
	w := &watch{spec: sp, cache: c, inf: inf, ctx: ctx, cancel: cancel, started: time.Now(), synced: make(chan struct{}),
		regs: map[*registration]toolscache.ResourceEventHandlerRegistration{}}
	for _, r := range s.regs {
		r.attach(w)
	}
	go func() { _ = c.Start(ctx) }()
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			s.metrics.synced(time.Since(w.started))
			close(w.synced)
		}
	}()
	return w, nil
}

func (w *watch) stop() { w.cancel() }

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
	s.mu.Unlock()
	_ = s.Ready() // the plan may be complete now
}

// promoteLocked replaces, by w, the current watch of w's name if w is its successor; the
// caller holds mu.
func (s *Scope) promoteLocked(w *watch) {
	if cur := s.watches[w.spec.Name()]; cur != nil && cur.next == w {
		cur.stop()
		s.watches[w.spec.Name()] = w
	}
}

// serving is the synced watch that covers the pods in namespace sel selects, or nil.
func (s *Scope) serving(namespace string, sel labels.Selector) crcache.Cache {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, w := range s.running() {
		if w.isSynced() && w.spec.Covers(namespace, sel) {
			return w.cache
		}
	}
	return nil
}

// synced lists the synced watches.
func (s *Scope) synced() []crcache.Cache {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []crcache.Cache
	for _, w := range s.running() {
		if w.isSynced() {
			out = append(out, w.cache)
		}
	}
	return out
}

// getPod reads a pod from a synced watch; NotFound when none holds it (the eviction guard
// then asks the API server).
func (s *Scope) getPod(ctx context.Context, key client.ObjectKey, pod *corev1.Pod, opts ...client.GetOption) error {
	for _, c := range s.synced() {
		err := c.Get(ctx, key, pod, opts...)
		if err == nil || !apierrors.IsNotFound(err) {
			return err
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
}

// listPods lists pods from the watch that covers the list, or from the API server.
func (s *Scope) listPods(ctx context.Context, list *corev1.PodList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	sel, liveSel := o.LabelSelector, o.LabelSelector
	owner, byOwner := "", false
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		if owner, byOwner = o.FieldSelector.RequiresExactMatch(informer.OwnerIndex); !byOwner || len(o.FieldSelector.Requirements()) != 1 {
			return fmt.Errorf("pods are read by owner (%s) or by labels, not by field selector %q", informer.OwnerIndex, o.FieldSelector)
		}
	}
	if byOwner && (sel == nil || sel.Empty()) {
		var err error
		if sel, liveSel, err = s.ownerSelector(ctx, o.Namespace, types.UID(owner)); err != nil {
			return err
		}
	}
	if c := s.serving(o.Namespace, sel); c != nil {
		return c.List(ctx, list, opts...)
	}
	if s.live == nil {
		return errors.New("the pods are outside holdfast's pod cache and it has no reader of the API server")
	}
	reason := ReasonOutside
	if sel == nil {
		reason = ReasonOwnerUnknown
	}
	items, err := s.liveList(ctx, o.Namespace, liveSel, reason)
	if err != nil {
		return err
	}
	// The owner is filtered here, as the cache's index does.
	list.Items = list.Items[:0]
	for i := range items {
		if ref := metav1.GetControllerOfNoCopy(&items[i]); !byOwner || (ref != nil && string(ref.UID) == owner) {
			list.Items = append(list.Items, items[i])
		}
	}
	return nil
}

// liveTTL is how long a live list answers the reads of the same selector: a Deployment's
// pods are read once per ReplicaSet, and one list of its selector answers them all.
const liveTTL = time.Second

type liveList struct {
	at    time.Time
	items []corev1.Pod
}

// liveList lists the pods sel selects in namespace from the API server, or returns the list
// of the same selector read within liveTTL. Its items are shared: read them, never write them.
func (s *Scope) liveList(ctx context.Context, namespace string, sel labels.Selector, reason string) ([]corev1.Pod, error) {
	key := namespace + "\x00"
	if sel != nil {
		key += sel.String()
	}
	now := time.Now()
	s.liveMu.Lock()
	if l, ok := s.lives[key]; ok && now.Sub(l.at) < liveTTL {
		s.liveMu.Unlock()
		return l.items, nil
	}
	s.liveMu.Unlock()
	s.metrics.liveRead(reason)
	var list corev1.PodList
	if err := s.live.List(ctx, &list, &client.ListOptions{Namespace: namespace, LabelSelector: sel}); err != nil {
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
	s.lives[key] = liveList{at: now, items: list.Items}
	return list.Items, nil
}

// ownerSelector is the selector of the ReplicaSet, StatefulSet or DaemonSet with this UID,
// as the cache holds it: every pod it owns matches it (kube's controllers release the pods
// that do not). Nil when the cache holds no such owner. live is what to list the API server
// by: a ReplicaSet's Deployment's selector, so that one list answers all its ReplicaSets.
func (s *Scope) ownerSelector(ctx context.Context, namespace string, uid types.UID) (sel, live labels.Selector, err error) {
	for _, list := range ownerLists() {
		if err := informer.ListByUID(ctx, s.owners, list, namespace, uid); err != nil {
			return nil, nil, err
		}
		if sel = selectorOf(list); sel == nil {
			continue
		}
		live = sel
		if rs, ok := list.(*appsv1.ReplicaSetList); ok {
			if ref := metav1.GetControllerOfNoCopy(&rs.Items[0]); ref != nil && ref.Kind == "Deployment" {
				d := &appsv1.Deployment{}
				if err := informer.Get(ctx, s.owners, client.ObjectKey{Namespace: namespace, Name: ref.Name}, d); err == nil && d.UID == ref.UID {
					if dsel := parseSelector(d.Spec.Selector); dsel != nil {
						live = dsel
					}
				}
			}
		}
		return sel, live, nil
	}
	return nil, nil, nil
}

// Reasons a pod read went to the API server.
const (
	// ReasonOutside: no synced watch covers the read (a workload entering a selection, a
	// watch syncing after the scope widened, a workload no policy guards).
	ReasonOutside = "outside-scope"
	// ReasonOwnerUnknown: a read by an owner the cache does not hold yet.
	ReasonOwnerUnknown = "owner-unknown"
)

// Metrics are the pod scope's: its watches, their sync times and the reads they did not cover.
type Metrics struct {
	watchCount prometheus.Gauge
	syncTime   prometheus.Histogram
	live       *prometheus.CounterVec
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
	}
	for _, c := range []prometheus.Collector{m.watchCount, m.syncTime, m.live} {
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

func (m *Metrics) liveRead(reason string) {
	if m != nil {
		m.live.WithLabelValues(reason).Inc()
	}
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
	return s.getPod(ctx, key, &corev1.Pod{}) == nil
}

// Covered reports whether a synced watch covers the pods in namespace that sel selects:
// whether holdfast reads them from its cache rather than from the API server.
func (s *Scope) Covered(namespace string, sel labels.Selector) bool {
	return s.serving(namespace, sel) != nil
}
