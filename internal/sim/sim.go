package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/controller"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/kubemodel"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// Namespace is where the simulated holdfast keeps its journals and ledgers.
const Namespace = "holdfast-system"

// settleLimit bounds one controller's actions at one instant.
const settleLimit = 100000

// epoch is the simulation's start: an hour in, so that the starting pods can have been
// Ready for an hour.
var epoch = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

type sim struct {
	sc          *Scenario
	now         time.Time
	startup     time.Duration
	store       *memstore.Store
	writer      memstore.Writer
	journals    *journal.Store
	recorders   map[v1alpha1.WorkloadKind]*controller.JournalRecorder
	rollout     *rollout.Handler
	eviction    *eviction.Handler
	rolloutPols bool

	nodes     []*node
	nodeByNam map[string]*node
	workloads []*simWorkload
	byRef     map[workload.Ref]*simWorkload
	operators []*operator
	drains    []*drainRun
	res       *Result
	seq       int
	step      int // the next timeline step
	// placements counts the changes that can let a pending pod be placed: pods gone,
	// nodes cordoned or uncordoned.
	placements int
}

type node struct {
	obj   *corev1.Node
	index int
	pods  []*corev1.Pod // bound to it, terminating included
}

type pod = kubemodel.Pod[string]

type simWorkload struct {
	// ref names the workload as the scenario does, without a UID: uid is the one it was
	// created with.
	ref       workload.Ref
	obj       client.Object // as the API server holds it, status as its controller wrote it
	exists    bool
	k         *kubemodel.Workload[string]
	templates map[string]corev1.PodTemplateSpec
	numbers   map[string]int64
	revisions map[string]client.Object
	objects   map[*pod]*corev1.Pod
	pending   []*pod // not yet scheduled
	// triedAt is s.placements when its pending pods last failed to be placed.
	triedAt   int
	uid       types.UID
	fig       *WorkloadFigures
	evictedAt []time.Time
	dirty     bool
	// journalDue is a change the journal recorder has not seen; sampled, figures taken.
	journalDue, sampled bool
	// serving is every wanted pod having served at once, at some point.
	serving bool
	// expected is how many pods should serve: on a scale up, the old count until the new
	// one first serves.
	expected int
	minReady time.Duration
}

// Run runs the scenario and returns what happened.
func Run(sc *Scenario) (*Result, error) {
	s := &sim{sc: sc, now: epoch, startup: durationOr(sc.Spec.PodStartup, defaultStartup),
		store:    memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}),
		journals: &journal.Store{}, nodeByNam: map[string]*node{}, byRef: map[workload.Ref]*simWorkload{},
		res: &Result{Scenario: sc.Name, Description: sc.Spec.Description}}
	s.store.Now = func() metav1.Time { return metav1.NewTime(s.now) }
	s.writer = memstore.Writer{Store: s.store}
	clk := clock{s}
	matcher := policy.NewMatcher()
	s.recorders = map[v1alpha1.WorkloadKind]*controller.JournalRecorder{}
	for _, k := range workload.Kinds() {
		s.recorders[k] = &controller.JournalRecorder{Client: s.writer, Kind: k, Namespace: Namespace, Matcher: matcher, Clock: clk}
	}
	ledgers := &budget.Ledgers{Live: s.writer, Namespace: Namespace, Identity: "holdfast-simulate"}
	s.rollout = &rollout.Handler{Reader: s.store, Decoder: admission.NewDecoder(informer.NewScheme()), Clock: clk, Matcher: matcher,
		Journals: s.journals, Ledgers: ledgers}
	s.eviction = &eviction.Handler{Reader: s.store, APIReader: s.store, Ledgers: ledgers, Clock: clk, Matcher: matcher, Holds: &eviction.Holds{}, Journals: s.journals}
	if err := s.load(); err != nil {
		return nil, err
	}
	end := epoch.Add(durationOr(sc.Spec.Until, defaultUntil))
	for {
		s.tick()
		next, ok := s.next()
		if !ok || next.After(end) {
			if ok {
				s.res.TimedOut = true
				s.now = end
			}
			break
		}
		s.now = next
	}
	s.finish()
	return s.res, nil
}

// clock is the simulation's virtual clock.
type clock struct{ s *sim }

func (c clock) Now() time.Time                  { return c.s.now }
func (c clock) Since(t time.Time) time.Duration { return c.s.now.Sub(t) }

func (s *sim) at() float64 { return s.now.Sub(epoch).Seconds() }

// load puts the scenario's objects in the cluster; workloads start rolled out.
func (s *sim) load() error {
	for _, g := range s.sc.Spec.Nodes {
		for i := range g.Count {
			s.addNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", g.Prefix, i), Labels: g.Labels},
				Spec: corev1.NodeSpec{Unschedulable: g.Unschedulable}})
		}
	}
	namespaces := map[string]bool{}
	for _, o := range s.sc.Objects {
		switch obj := o.Object.(type) {
		case *corev1.Node:
			if s.nodeByNam[obj.Name] != nil {
				return fmt.Errorf("%s: node %s is defined twice", o.Source, obj.Name)
			}
			s.addNode(obj.DeepCopy())
		case *corev1.Namespace:
			ns := obj.DeepCopy()
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
			s.store.Put(ns)
			namespaces[ns.Name] = true
		case *v1alpha1.RolloutPolicy, *v1alpha1.DisruptionPolicy:
			// Load admitted it through internal/validation, as the API server would.
			obj.SetUID(s.uid())
			s.store.Put(obj.DeepCopyObject().(client.Object))
			_, s.rolloutPols = obj.(*v1alpha1.RolloutPolicy)
		}
	}
	for _, o := range s.sc.Objects {
		m, ok := workload.MetaOf(o.Object)
		if !ok {
			continue
		}
		obj := o.Object.DeepCopyObject().(client.Object)
		ref := workload.Ref{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}
		if ref.Namespace == "" {
			return fmt.Errorf("%s: %s: metadata.namespace is required", o.Source, ref)
		}
		if s.byRef[ref] != nil {
			return fmt.Errorf("%s: %s is defined twice", o.Source, ref)
		}
		if err := selects(obj); err != nil {
			return fmt.Errorf("%s: %s: %w", o.Source, ref, err)
		}
		namespaces[ref.Namespace] = true
		w := s.newWorkload(ref)
		if err := s.create(w, obj); err != nil {
			return fmt.Errorf("%s: %w", o.Source, err)
		}
	}
	for _, st := range s.sc.Spec.Timeline {
		for _, name := range nodesOf(st) {
			if s.nodeByNam[name] == nil {
				return fmt.Errorf("timeline at %s: no node %s in the scenario", st.At.Duration, name)
			}
		}
		if a := st.Apply; a != nil {
			ref := a.Workload.Ref()
			namespaces[ref.Namespace] = true
			if s.byRef[ref] == nil && a.Template == nil && !s.createdEarlier(ref, st) {
				return fmt.Errorf("timeline at %s: %s does not exist yet: its first apply needs a template", st.At.Duration, ref)
			}
			if s.byRef[ref] != nil && a.Template != nil {
				obj := s.byRef[ref].obj.DeepCopyObject().(client.Object)
				applyTo(obj, a)
				if err := selects(obj); err != nil {
					return fmt.Errorf("timeline at %s: %s: %w", st.At.Duration, ref, err)
				}
			}
		}
	}
	for ns := range namespaces {
		if err := s.store.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{}); err != nil {
			s.store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{corev1.LabelMetadataName: ns}}})
		}
	}
	// The starting pods have been Ready for an hour and the journals say so.
	s.now = epoch.Add(-time.Hour)
	for _, w := range s.workloads {
		paused := w.k.Paused
		w.k.Paused = false // rolled out before it was paused
		for n := -1; n != len(w.k.Pods); {
			// Ordered controllers create a pod once the previous one is Ready: go on
			// until the workload has all it wants.
			n = len(w.k.Pods)
			s.settle(w)
			s.schedule(w)
			if len(w.pending) > 0 {
				return fmt.Errorf("%s: %d of its starting pods cannot be scheduled (nodes, nodeSelector, cordons, anti-affinity)", w.ref, len(w.pending))
			}
			for _, p := range w.k.Pods {
				p.ReadyAt = s.now.Add(-w.minReady)
			}
		}
		w.k.Paused = paused
	}
	s.refresh()
	s.record()
	s.sample()
	s.now = epoch
	return nil
}

// createdEarlier is an apply with a template of ref before st in the timeline.
func (s *sim) createdEarlier(ref workload.Ref, st Step) bool {
	for _, prev := range s.sc.Spec.Timeline {
		if prev.Apply != nil && prev.Apply.Workload.Ref() == ref && prev.Apply.Template != nil && prev.At.Duration <= st.At.Duration {
			return true
		}
	}
	return false
}

// selects is the API server's check that a workload's selector selects its pod template.
func selects(obj client.Object) error {
	m, ok := workload.MetaOf(obj)
	if !ok {
		return fmt.Errorf("a %T is not a workload", obj)
	}
	if m.Selector == nil {
		return nil // an apply's CREATE selects its template's labels
	}
	selector, err := metav1.LabelSelectorAsSelector(m.Selector)
	if err != nil {
		return fmt.Errorf("spec.selector: %w", err)
	}
	if selector.Empty() || !selector.Matches(labels.Set(m.PodLabels)) {
		return fmt.Errorf("spec.template.metadata.labels: %v does not match spec.selector %s (the API server refuses it)", m.PodLabels, selector)
	}
	return nil
}

func nodesOf(st Step) []string {
	switch {
	case st.Drain != nil:
		return st.Drain.Nodes
	case st.Cordon != nil:
		return st.Cordon.Nodes
	case st.Uncordon != nil:
		return st.Uncordon.Nodes
	}
	return nil
}

func (s *sim) uid() types.UID {
	s.seq++
	return types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", s.seq))
}

func (s *sim) addNode(n *corev1.Node) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[corev1.LabelHostname] = n.Name
	n.UID = s.uid()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	nd := &node{obj: n, index: len(s.nodes)}
	s.nodes = append(s.nodes, nd)
	s.nodeByNam[n.Name] = nd
	s.store.Put(n)
}

func (s *sim) newWorkload(ref workload.Ref) *simWorkload {
	w := &simWorkload{ref: ref, templates: map[string]corev1.PodTemplateSpec{}, numbers: map[string]int64{},
		revisions: map[string]client.Object{}, objects: map[*pod]*corev1.Pod{}, fig: &WorkloadFigures{Workload: ref.String()}}
	w.k = &kubemodel.Workload[string]{Kind: ref.Kind, Graceful: true}
	// The controllers count a pod available once Ready for minReadySeconds.
	w.k.Ready = func(p *pod) bool { return s.available(w, p) }
	w.k.NewPod = func(t string, slot int) *pod { return s.newPod(w, t, slot) }
	s.workloads = append(s.workloads, w)
	s.byRef[ref] = w
	return w
}

// create stores the workload obj (a CREATE the API server admitted).
func (s *sim) create(w *simWorkload, obj client.Object) error {
	obj.SetUID(s.uid())
	obj.SetGeneration(1)
	obj.SetCreationTimestamp(metav1.NewTime(s.now))
	w.uid, w.exists, w.obj = obj.GetUID(), true, obj
	if err := s.adopt(w); err != nil {
		return err
	}
	s.store.Put(obj)
	w.dirty = true
	return nil
}

// adopt reads the workload's spec into the controller model: what every kind has as the
// rollout guard reads it (workload.From), then what only the kind's controller reads.
func (s *sim) adopt(w *simWorkload) error {
	v, err := workload.From(w.obj)
	if err != nil {
		return err
	}
	tpl, err := v.Template.Spec()
	if err != nil {
		return err
	}
	key := hash(tpl)
	w.templates[key] = *tpl.DeepCopy()
	k := w.k
	k.Template, k.Paused, k.OnDelete = key, v.Rollout.Paused, v.Rollout.OnDelete
	k.MaxSurge, k.MaxUnavailable, k.Partition = 0, 1, 0
	if workload.Scalable(v.Kind) {
		k.Replicas = int(v.Expected)
	}
	w.minReady = time.Duration(v.Strategy.MinReadySeconds) * time.Second
	switch o := w.obj.(type) {
	case *appsv1.Deployment:
		// The API server defaults both to 25%; Recreate takes every pod down and adds none.
		quarter := intstr.FromString("25%")
		surge, unavailable := cmp.Or(v.Strategy.MaxSurge, &quarter), cmp.Or(v.Strategy.MaxUnavailable, &quarter)
		if !v.Strategy.Rolling {
			surge, unavailable = ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromString("100%"))
		}
		sv, uv := policy.Fenceposts(surge, unavailable, int32(k.Replicas))
		k.MaxSurge, k.MaxUnavailable = int(sv), int(uv)
	case *appsv1.StatefulSet:
		k.OrderedReady = o.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			k.Partition = int(ptr.Deref(ru.Partition, 0))
		}
	case *appsv1.DaemonSet:
		k.Nodes = s.daemonNodes(w)
		n := policy.Resolve(policy.MaxUnavailable, v.Kind, v.Strategy.MaxUnavailable, int32(len(k.Nodes)))
		k.MaxUnavailable = max(int(n), 1)
	}
	return nil
}

// daemonNodes are the nodes a DaemonSet's pods run on: those its nodeSelector selects
// (cordoned ones included: DaemonSet pods tolerate unschedulable).
func (s *sim) daemonNodes(w *simWorkload) []int {
	tpl := w.templates[w.k.Template]
	var out []int
	for _, n := range s.nodes {
		if labels.SelectorFromSet(tpl.Spec.NodeSelector).Matches(labels.Set(n.obj.Labels)) {
			out = append(out, n.index)
		}
	}
	return out
}

// hash names a template, as pod-template-hash does.
func hash(t *corev1.PodTemplateSpec) string {
	raw, _ := json.Marshal(t)
	h := fnv.New32a()
	_, _ = h.Write(raw)
	return fmt.Sprintf("%08x", h.Sum32())[:8]
}

// ready is a pod Ready now: scheduled, started and not terminating.
func (s *sim) ready(p *pod) bool {
	return !p.ReadyAt.IsZero() && !s.now.Before(p.ReadyAt) && !p.Terminating
}

// available is a pod Ready for the workload's minReadySeconds.
func (s *sim) available(w *simWorkload, p *pod) bool {
	return s.ready(p) && !s.now.Before(p.ReadyAt.Add(w.minReady))
}

// termination is how long an evicted or deleted pod takes to be gone: spec.podTermination,
// or at most its grace period (kube's default 30 s).
func (s *sim) termination(obj *corev1.Pod) time.Duration {
	if s.sc.Spec.PodTermination != nil {
		return s.sc.Spec.PodTermination.Duration
	}
	return time.Duration(ptr.Deref(obj.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
}

// newPod is the controller creating a pod; the scheduler places it.
func (s *sim) newPod(w *simWorkload, t string, slot int) *pod {
	p := &pod{Template: t, Slot: slot, Created: s.now}
	tpl := w.templates[t]
	name := fmt.Sprintf("%s-%s-%d", w.ref.Name, t[:5], s.seq)
	s.seq++
	if w.ref.Kind == v1alpha1.KindStatefulSet {
		name = fmt.Sprintf("%s-%d", w.ref.Name, slot)
	}
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ref.Namespace, Name: name, UID: s.uid(),
		CreationTimestamp: metav1.NewTime(s.now), Labels: map[string]string{}}, Spec: *tpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	for k, v := range tpl.Labels {
		obj.Labels[k] = v
	}
	s.revision(w, t)
	if w.ref.Kind == v1alpha1.KindDeployment {
		rs := w.revisions[t]
		obj.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = t
		obj.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	} else {
		obj.Labels[appsv1.ControllerRevisionHashLabelKey] = w.revisions[t].GetName()
		obj.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(w.obj, appsv1.SchemeGroupVersion.WithKind(string(w.ref.Kind)))}
	}
	w.objects[p] = obj
	w.pending = append(w.pending, p)
	w.triedAt = -1
	w.dirty = true
	s.store.Put(obj)
	return p
}

// revision is the ReplicaSet or ControllerRevision of template t: a new or reused
// template becomes the newest revision, as its controller numbers them.
func (s *sim) revision(w *simWorkload, t string) {
	var top int64
	for _, n := range w.numbers {
		top = max(top, n)
	}
	if w.numbers[t] == top && top != 0 {
		return
	}
	w.numbers[t] = top + 1
	tpl := w.templates[t]
	if obj := w.revisions[t]; obj != nil {
		if rs, ok := obj.(*appsv1.ReplicaSet); ok {
			rs.Annotations["deployment.kubernetes.io/revision"] = fmt.Sprint(top + 1)
		} else {
			obj.(*appsv1.ControllerRevision).Revision = top + 1
		}
		return
	}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(w.obj, appsv1.SchemeGroupVersion.WithKind(string(w.ref.Kind)))}
	name := fmt.Sprintf("%s-%s", w.ref.Name, t)
	var obj client.Object
	if w.ref.Kind == v1alpha1.KindDeployment {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: w.ref.Namespace, Name: name, UID: s.uid(),
			CreationTimestamp: metav1.NewTime(s.now), OwnerReferences: owner, Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: t},
			Annotations: map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(top + 1)}},
			Spec: appsv1.ReplicaSetSpec{Template: *tpl.DeepCopy()}}
		for k, v := range tpl.Labels {
			rs.Labels[k] = v
		}
		rs.Spec.Template.Labels = rs.Labels
		obj = rs
	} else {
		raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: w.ref.Namespace, Name: name, UID: s.uid(),
			CreationTimestamp: metav1.NewTime(s.now), OwnerReferences: owner, Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: name}},
			Data: runtime.RawExtension{Raw: raw}, Revision: top + 1}
		for k, v := range tpl.Labels {
			cr.Labels[k] = v
		}
		obj = cr
	}
	w.revisions[t] = obj
	s.store.Put(obj)
}

// settle runs the workload's controller until it has nothing to do now, and removes the
// pods it deleted.
func (s *sim) settle(w *simWorkload) {
	if !w.exists {
		return
	}
	if !(w.ref.Kind == v1alpha1.KindDeployment && w.k.Paused) {
		// A paused Deployment makes no ReplicaSet for a new template.
		s.revision(w, w.k.Template)
	}
	if w.k.Settle(settleLimit) > 0 {
		w.dirty = true
	}
}

// schedule binds the workload's pending pods, and forgets the pods its controller removed.
func (s *sim) schedule(w *simWorkload) {
	for _, p := range slices.Clone(w.k.Pods) {
		if obj := w.objects[p]; p.Terminating && obj.DeletionTimestamp == nil {
			// Deleted by its controller: terminating, or gone at once if never scheduled.
			if obj.Spec.NodeName == "" {
				w.k.Remove(p)
				continue
			}
			obj.DeletionTimestamp = ptr.To(metav1.NewTime(s.now))
			s.store.Put(obj)
			w.dirty = true
		}
	}
	if len(w.objects) > len(w.k.Pods) {
		// The controller removed some: forget them, in creation order.
		live := make(map[*pod]bool, len(w.k.Pods))
		for _, p := range w.k.Pods {
			live[p] = true
		}
		for _, p := range sortedPods(w.objects) {
			if !live[p] {
				s.gone(w, p, w.objects[p])
			}
		}
	}
	if len(w.pending) == 0 || w.triedAt == s.placements {
		return // nothing has changed for its pending pods
	}
	var still []*pod
	for _, p := range w.pending {
		if w.objects[p] == nil {
			continue // removed before it was placed
		}
		n := s.place(w, p)
		if n == nil {
			still = append(still, p)
			continue
		}
		obj := w.objects[p]
		obj.Spec.NodeName = n.obj.Name
		obj.Status.Phase = corev1.PodRunning
		n.pods = append(n.pods, obj)
		p.ReadyAt = s.now.Add(s.startup)
		s.store.Put(obj)
	}
	w.pending = still
	if len(still) > 0 {
		w.triedAt = s.placements
	}
}

// sortedPods is the pods in creation order, so that what follows from them is the same on every run.
func sortedPods(objs map[*pod]*corev1.Pod) []*pod {
	out := make([]*pod, 0, len(objs))
	for p := range objs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return objs[out[i]].UID < objs[out[j]].UID })
	return out
}

func (s *sim) gone(w *simWorkload, p *pod, obj *corev1.Pod) {
	delete(w.objects, p)
	if n := s.nodeByNam[obj.Spec.NodeName]; n != nil {
		n.pods = slices.DeleteFunc(n.pods, func(o *corev1.Pod) bool { return o == obj })
	}
	s.placements++
	s.store.Remove(obj)
	// A StatefulSet's replacement has the name of the pod it replaces.
	for _, o := range w.objects {
		if o.Name == obj.Name {
			s.store.Put(o)
		}
	}
	w.dirty = true
}

// place is the scheduler: a DaemonSet pod goes to its node; another pod to the
// schedulable node with the fewest pods that its nodeSelector and required pod
// anti-affinity (by hostname) allow.
func (s *sim) place(w *simWorkload, p *pod) *node {
	if w.ref.Kind == v1alpha1.KindDaemonSet {
		return s.nodes[p.Slot]
	}
	obj := w.objects[p]
	var best *node
	for _, n := range s.nodes {
		if n.obj.Spec.Unschedulable || !labels.SelectorFromSet(obj.Spec.NodeSelector).Matches(labels.Set(n.obj.Labels)) || s.repelled(obj, n) {
			continue
		}
		if best == nil || len(n.pods) < len(best.pods) {
			best = n
		}
	}
	return best
}

// repelled is a node where a pod that obj's required anti-affinity (by hostname) selects runs.
func (s *sim) repelled(obj *corev1.Pod, n *node) bool {
	if obj.Spec.Affinity == nil || obj.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range obj.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			continue
		}
		for _, o := range n.pods {
			if o.Namespace == obj.Namespace && sel.Matches(labels.Set(o.Labels)) {
				return true
			}
		}
	}
	return false
}

// tick is one instant: what is due happens, then the controllers and the recorder catch up.
func (s *sim) tick() {
	// Evicted pods whose grace period ended are gone.
	for _, w := range s.workloads {
		for _, p := range slices.Clone(w.k.Pods) {
			if p.Terminating && !s.now.Before(w.objects[p].DeletionTimestamp.Add(s.termination(w.objects[p]))) {
				w.k.Remove(p)
				w.dirty = true
			}
		}
	}
	s.catchUp()
	for s.step < len(s.sc.Spec.Timeline) && !epoch.Add(s.sc.Spec.Timeline[s.step].At.Duration).After(s.now) {
		s.begin(s.sc.Spec.Timeline[s.step])
		s.step++
		s.catchUp()
	}
	for _, o := range s.operators {
		if o.due(s.now) {
			s.operate(o)
			s.catchUp()
		}
	}
	for _, d := range s.drains {
		s.drainStep(d)
	}
	s.catchUp()
	s.sample()
}

// catchUp runs the controllers, the scheduler and the journal recorder until quiet.
func (s *sim) catchUp() {
	for range 100 {
		for _, w := range s.workloads {
			s.settle(w)
			s.schedule(w)
		}
		if !s.refresh() {
			break
		}
	}
	s.record()
}

// refresh writes the pods' and workloads' status as the kubelet and controllers would,
// and reports whether a controller has something to react to.
func (s *sim) refresh() bool {
	changed := false
	for _, w := range s.workloads {
		for _, p := range w.k.Pods {
			obj := w.objects[p]
			if obj == nil || obj.Spec.NodeName == "" {
				continue
			}
			ready := s.ready(p) || (p.Terminating && !p.ReadyAt.IsZero() && !s.now.Before(p.ReadyAt))
			was := len(obj.Status.Conditions) > 0 && obj.Status.Conditions[0].Status == corev1.ConditionTrue
			if ready != was {
				status, since := corev1.ConditionFalse, s.now
				if ready {
					status, since = corev1.ConditionTrue, p.ReadyAt
				}
				obj.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)}}
				w.dirty, changed = true, true
			}
		}
		if w.dirty {
			s.writeStatus(w)
		}
	}
	return changed
}

// writeStatus writes the workload's and its ReplicaSets' status from its pods.
func (s *sim) writeStatus(w *simWorkload) {
	if !w.exists {
		return
	}
	ready, all, updated, updatedReady, active := 0, 0, 0, 0, 0
	perRS := map[string][3]int32{}
	for _, p := range w.k.Pods {
		if p.Terminating {
			continue
		}
		active++
		r := perRS[p.Template]
		r[0]++
		if s.ready(p) {
			ready++
			r[1]++
		}
		if s.available(w, p) {
			all++
			r[2]++
		}
		perRS[p.Template] = r
		if p.Template == w.k.Template {
			updated++
			if s.ready(p) {
				updatedReady++
			}
		}
	}
	gen := w.obj.GetGeneration()
	switch o := w.obj.(type) {
	case *appsv1.Deployment:
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: int32(active), UpdatedReplicas: int32(updated),
			ReadyReplicas: int32(ready), AvailableReplicas: int32(all), UnavailableReplicas: int32(max(0, w.k.Replicas-all))}
		for t, obj := range w.revisions {
			rs := obj.(*appsv1.ReplicaSet)
			rs.Status = appsv1.ReplicaSetStatus{Replicas: perRS[t][0], ReadyReplicas: perRS[t][1], AvailableReplicas: perRS[t][2]}
			n := int32(0)
			if t == w.k.Template {
				n = int32(w.k.Replicas)
			} else {
				n = perRS[t][0]
			}
			rs.Spec.Replicas = &n
		}
	case *appsv1.StatefulSet:
		rev := w.revisions[w.k.Template]
		update, current := "", ""
		if rev != nil {
			update, current = rev.GetName(), rev.GetName()
		}
		if updated < active {
			current = "older"
		}
		o.Status = appsv1.StatefulSetStatus{ObservedGeneration: gen, Replicas: int32(active), UpdatedReplicas: int32(updated),
			ReadyReplicas: int32(ready), AvailableReplicas: int32(all), CurrentRevision: current, UpdateRevision: update}
	case *appsv1.DaemonSet:
		o.Status = appsv1.DaemonSetStatus{ObservedGeneration: gen, DesiredNumberScheduled: int32(len(w.k.Nodes)),
			CurrentNumberScheduled: int32(active), UpdatedNumberScheduled: int32(updated), NumberAvailable: int32(all),
			NumberReady: int32(ready), NumberUnavailable: int32(max(0, len(w.k.Nodes)-all))}
	}
	w.dirty = false
	w.dirtyJournal()
}

func (w *simWorkload) dirtyJournal() { w.journalDue = true }

// record is the leader's journal recorder reconciling the workloads that changed.
func (s *sim) record() {
	if !s.rolloutPols {
		return
	}
	for _, w := range s.workloads {
		if !w.journalDue {
			continue
		}
		w.journalDue = false
		r := s.recorders[w.ref.Kind]
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.ref.Namespace, Name: w.ref.Name}}); err != nil {
			s.res.Errors = append(s.res.Errors, fmt.Sprintf("%.1fs recording the journal of %s: %v", s.at(), w.ref, err))
			continue
		}
		cm := &corev1.ConfigMap{}
		name := journal.Name(w.ref.Kind, w.ref.Namespace, w.ref.Name)
		if err := s.store.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, cm); err == nil {
			s.journals.Add(cm)
		} else {
			s.journals.Delete(name)
		}
	}
}

// begin starts a timeline step.
func (s *sim) begin(st Step) {
	switch {
	case st.Apply != nil:
		s.want(st.Apply)
	case st.Drain != nil:
		s.startDrain(st.Drain)
	case st.Cordon != nil:
		s.cordon(st.Cordon.Nodes, true)
	case st.Uncordon != nil:
		s.cordon(st.Uncordon.Nodes, false)
	}
}

func (s *sim) cordon(names []string, on bool) {
	for _, name := range names {
		n := s.nodeByNam[name]
		n.obj.Spec.Unschedulable = on
		s.store.Put(n.obj)
	}
	s.placements++
	verb := map[bool]string{true: "cordon", false: "uncordon"}[on]
	s.log(Entry{Request: verb, Object: strings.Join(names, ","), Answer: "done"})
}

func (s *sim) log(e Entry) {
	e.At = math.Round(s.at()*10) / 10
	s.res.Timeline = append(s.res.Timeline, e)
}

// sample updates the figures from what the cluster looks like now.
func (s *sim) sample() {
	for _, w := range s.workloads {
		if !w.exists {
			continue
		}
		f := w.fig
		live, serving := 0, 0
		withPods := map[string]bool{}
		for _, p := range w.k.Pods {
			if p.Terminating {
				continue
			}
			live++
			withPods[p.Template] = true
			if s.ready(p) {
				serving++
			}
		}
		want := w.k.Wanted()
		f.PeakPods = max(f.PeakPods, live)
		f.PeakRevisionsWithPods = max(f.PeakRevisionsWithPods, len(withPods))
		// Pods still starting after a CREATE are not a disruption: count from the first
		// moment every wanted pod served.
		w.serving = w.serving || serving >= want
		if !w.serving {
			continue
		}
		// A scale up is measured against the old count until the new one serves.
		if want <= w.expected || serving >= want || w.expected == 0 {
			w.expected = want
		}
		expected := w.expected
		f.MaxUnavailable = max(f.MaxUnavailable, expected-serving)
		if !w.sampled || serving < f.MinReady {
			f.MinReady = serving
		}
		w.sampled = true
	}
}

// next is the next instant at which something can happen: a step of the timeline, a pod
// getting Ready or gone, a retry; none when the scenario has run its course.
func (s *sim) next() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(s.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if s.step < len(s.sc.Spec.Timeline) {
		consider(epoch.Add(s.sc.Spec.Timeline[s.step].At.Duration))
	}
	for _, w := range s.workloads {
		for _, p := range w.k.Pods {
			if p.Terminating {
				consider(w.objects[p].DeletionTimestamp.Add(s.termination(w.objects[p])))
			} else if !p.ReadyAt.IsZero() {
				consider(p.ReadyAt)
				consider(p.ReadyAt.Add(w.minReady))
			}
		}
	}
	for _, o := range s.operators {
		if !o.done {
			consider(o.next)
		}
	}
	for _, d := range s.drains {
		for _, t := range d.tries {
			if !t.done && !t.evicted {
				consider(t.next)
			}
		}
	}
	return next, !next.IsZero()
}

// operator is the loop of one workload's operator.
type operator struct {
	w        *simWorkload
	want     *Apply
	next     time.Time
	backoff  time.Duration
	done     bool
	refusals int
}

func (o *operator) due(now time.Time) bool { return !o.done && !now.Before(o.next) }

// want is an Apply step: the workload's operator wants this from now.
func (s *sim) want(a *Apply) {
	ref := a.Workload.Ref()
	w := s.byRef[ref]
	if w == nil {
		w = s.newWorkload(ref)
	}
	for _, o := range s.operators {
		if o.w == w {
			o.want = a
			if o.done {
				o.done, o.next, o.backoff = false, s.now, 0
			}
			return
		}
	}
	s.operators = append(s.operators, &operator{w: w, want: a, next: s.now})
}

// operate sends the operator's change; refused, it requeues with backoff.
func (s *sim) operate(o *operator) {
	w, a := o.w, o.want
	var oldObj client.Object
	var newObj client.Object
	op := admissionv1.Update
	if !w.exists {
		op = admissionv1.Create
		newObj = newWorkloadObject(a)
	} else {
		oldObj = w.obj
		newObj = w.obj.DeepCopyObject().(client.Object)
	}
	changed := applyTo(newObj, a)
	if op == admissionv1.Update && !changed {
		o.done = true
		return
	}
	if op == admissionv1.Update {
		newObj.SetGeneration(oldObj.GetGeneration() + 1)
	}
	user := a.User
	if user == "" {
		user = "operator"
	}
	resp := s.send(s.rollout.Handle, op, w.ref, newObj, oldObj, authenticationv1.UserInfo{Username: user})
	e := Entry{Request: string(op), Object: w.ref.String(), Answer: "admitted", By: user}
	if !resp.Allowed {
		e.Answer, e.Message = answer(resp)
		s.res.Requests.RolloutRefused++
		o.refusals++
		o.backoff = nextBackoff(o.backoff, a.Backoff)
		o.next = s.now.Add(o.backoff)
		e.RetryIn = o.backoff.Seconds()
		s.log(e)
		return
	}
	s.res.Requests.RolloutAdmitted++
	s.log(e)
	o.done, o.backoff = true, 0
	if op == admissionv1.Create {
		if err := s.create(w, newObj); err != nil {
			s.res.Errors = append(s.res.Errors, fmt.Sprintf("%.1fs %s: %v", s.at(), w.ref, err))
		}
		return
	}
	w.obj = newObj
	if err := s.adopt(w); err != nil {
		s.res.Errors = append(s.res.Errors, fmt.Sprintf("%.1fs %s: %v", s.at(), w.ref, err))
	}
	s.store.Put(newObj)
	w.dirty = true
	w.dirtyJournal()
}

func nextBackoff(cur time.Duration, b *Backoff) time.Duration {
	initial, most := defaultBackoff, defaultMaxBackoff
	if b != nil {
		initial, most = b.Initial.Duration, b.Max.Duration
	}
	if cur == 0 {
		return initial
	}
	return min(2*cur, most)
}

func newWorkloadObject(a *Apply) client.Object {
	meta := metav1.ObjectMeta{Namespace: a.Workload.Namespace, Name: a.Workload.Name, Labels: a.Labels}
	var tplLabels map[string]string
	if a.Template != nil {
		tplLabels = a.Template.Labels
	}
	sel := &metav1.LabelSelector{MatchLabels: tplLabels}
	switch a.Workload.Kind {
	case v1alpha1.KindDeployment:
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: sel,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}}}
	case v1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: sel,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}}
	}
	return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel,
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}}
}

// applyTo writes what a wants into obj and reports whether that changed it.
func applyTo(obj client.Object, a *Apply) bool {
	before, _ := json.Marshal(obj)
	if a.Template != nil {
		*workload.PodTemplate(obj) = *a.Template.DeepCopy()
	}
	if a.Replicas != nil {
		workload.SetReplicas(obj, *a.Replicas)
	}
	after, _ := json.Marshal(obj)
	return string(before) != string(after)
}

// send is the API server calling a webhook with an admission request for obj.
func (s *sim) send(handle func(context.Context, admission.Request) admission.Response, op admissionv1.Operation, ref workload.Ref,
	obj, old client.Object, user authenticationv1.UserInfo) admission.Response {
	s.seq++
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(s.seq)),
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: string(ref.Kind)},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: workload.Resource(ref.Kind)},
		Name:     ref.Name, Namespace: ref.Namespace, Operation: op, DryRun: ptr.To(false), UserInfo: user}}
	req.Object.Raw, _ = json.Marshal(obj)
	if old != nil {
		req.OldObject.Raw, _ = json.Marshal(old)
	}
	return handle(context.Background(), req)
}

// answer is a refusal as the requester sees it.
func answer(resp admission.Response) (string, string) {
	code, msg := int32(http.StatusForbidden), ""
	if r := resp.Result; r != nil {
		msg = r.Message
		if r.Code != 0 {
			code = r.Code
		}
	}
	switch code {
	case http.StatusTooManyRequests:
		return "deferred (429)", msg
	case http.StatusForbidden:
		return "refused (403)", msg
	}
	return fmt.Sprintf("failed (%d)", code), msg
}

// drainRun is one Drain step in progress.
type drainRun struct {
	spec    *Drain
	start   time.Time
	nodes   map[string]*nodeDrain
	tries   []*evictTry
	figures *DrainFigures
}

type nodeDrain struct {
	done   bool
	failed bool
}

// evictTry is the drain tool's eviction of one pod.
type evictTry struct {
	w        *simWorkload
	p        *pod
	node     string
	next     time.Time
	silent   int // client-go's silent retries of this call so far
	evicted  bool
	done     bool
	deferred int
}

func (s *sim) startDrain(d *Drain) {
	s.cordon(d.Nodes, true)
	run := &drainRun{spec: d, start: s.now, nodes: map[string]*nodeDrain{},
		figures: &DrainFigures{Nodes: strings.Join(d.Nodes, ","), Requested: len(d.Nodes)}}
	for _, name := range d.Nodes {
		run.nodes[name] = &nodeDrain{}
		for _, w := range s.workloads {
			if w.ref.Kind == v1alpha1.KindDaemonSet && !d.DaemonSets {
				continue
			}
			for _, p := range w.k.Pods {
				if obj := w.objects[p]; obj != nil && obj.Spec.NodeName == name && !p.Terminating {
					run.tries = append(run.tries, &evictTry{w: w, p: p, node: name, next: s.now})
				}
			}
		}
	}
	order := map[string]int{}
	for i, name := range d.Nodes {
		order[name] = i
	}
	sort.SliceStable(run.tries, func(i, j int) bool { return order[run.tries[i].node] < order[run.tries[j].node] })
	s.drains = append(s.drains, run)
	s.res.Drains = append(s.res.Drains, run.figures)
}

// drainStep sends the evictions due and ends the node drains whose pods are gone.
func (s *sim) drainStep(d *drainRun) {
	retry := durationOr(d.spec.RetryAfter, defaultDrainRetry)
	clientRetries := defaultClientRetry
	if d.spec.ClientRetries != nil {
		clientRetries = *d.spec.ClientRetries
	}
	user := d.spec.User
	if user == "" {
		user = "kubernetes-admin"
	}
	current := ""
	if d.spec.Sequential {
		for _, name := range d.spec.Nodes {
			if nd := d.nodes[name]; !nd.done && !nd.failed {
				current = name
				break
			}
		}
	}
	for _, t := range d.tries {
		if t.done || t.evicted || s.now.Before(t.next) || (current != "" && t.node != current) {
			continue
		}
		obj := t.w.objects[t.p]
		if obj == nil || t.p.Terminating {
			t.evicted = true // gone meanwhile
			continue
		}
		resp := s.evict(obj, authenticationv1.UserInfo{Username: user, Groups: d.spec.Groups})
		e := Entry{Request: "EVICT", Object: fmt.Sprintf("Pod %s/%s (%s on %s)", obj.Namespace, obj.Name, t.w.ref.Name, t.node), By: user, Answer: "allowed"}
		if resp.Allowed {
			s.res.Requests.EvictionsAllowed++
			d.figures.Evictions++
			t.evicted = true
			if t.deferred > 0 {
				e.Message = fmt.Sprintf("after %d deferrals", t.deferred)
			}
			s.log(e)
			t.p.Terminating = true
			obj.DeletionTimestamp = ptr.To(metav1.NewTime(s.now))
			s.store.Put(obj)
			t.w.evictedAt = append(t.w.evictedAt, s.now)
			t.w.dirty = true
			continue
		}
		e.Answer, e.Message = answer(resp)
		code := int32(0)
		if resp.Result != nil {
			code = resp.Result.Code
		}
		if code != http.StatusTooManyRequests {
			// kubectl drain gives up on anything but a 429.
			s.res.Requests.EvictionsRefused++
			d.figures.Refused++
			t.done = true
			d.nodes[t.node].failed = true
			s.log(e)
			continue
		}
		s.res.Requests.EvictionsDeferred++
		d.figures.Deferred++
		if t.deferred == 0 {
			s.log(e) // the first of a streak; the allowed entry counts the rest
		}
		t.deferred++
		wait := retry
		if ra := retryAfter(resp); ra > 0 && t.silent < clientRetries {
			wait, t.silent = ra, t.silent+1
		} else {
			t.silent = 0
		}
		t.next = s.now.Add(wait)
	}
	finished := false
	for _, name := range d.spec.Nodes {
		nd := d.nodes[name]
		if nd.done || nd.failed {
			continue
		}
		empty := true
		for _, t := range d.tries {
			if t.node == name && !t.done && (!t.evicted || t.w.objects[t.p] != nil) {
				empty = false
			}
		}
		if empty {
			nd.done = true
			d.figures.Drained++
			d.figures.Seconds = math.Round(s.now.Sub(d.start).Seconds()*10) / 10
			s.log(Entry{Request: "drain", Object: name, Answer: "done"})
			finished = true
		}
	}
	if finished && d.spec.Sequential {
		s.drainStep(d) // the next node begins now
	}
}

func retryAfter(resp admission.Response) time.Duration {
	if r := resp.Result; r != nil && r.Details != nil {
		return time.Duration(r.Details.RetryAfterSeconds) * time.Second
	}
	return 0
}

// evict is the API server calling the eviction webhook for obj.
func (s *sim) evict(obj *corev1.Pod, user authenticationv1.UserInfo) admission.Response {
	s.seq++
	ev := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}
	raw, _ := json.Marshal(ev)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(s.seq)),
		Kind:        metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		SubResource: "eviction", Name: obj.Name, Namespace: obj.Namespace, Operation: admissionv1.Create,
		DryRun: ptr.To(false), UserInfo: user, Object: runtime.RawExtension{Raw: raw}}}
	return s.eviction.Handle(context.Background(), req)
}

// finish computes the figures that need the whole run.
func (s *sim) finish() {
	s.res.Seconds = math.Round(s.at()*10) / 10
	for _, w := range s.workloads {
		f := w.fig
		f.Revisions = len(w.revisions)
		f.Evictions = len(w.evictedAt)
		f.MinEvictionGapSeconds = -1
		for i := 1; i < len(w.evictedAt); i++ {
			gap := math.Round(w.evictedAt[i].Sub(w.evictedAt[i-1]).Seconds()*10) / 10
			if f.MinEvictionGapSeconds < 0 || gap < f.MinEvictionGapSeconds {
				f.MinEvictionGapSeconds = gap
			}
		}
		f.Converged = w.exists && rolledOut(s, w)
		for _, o := range s.operators {
			if o.w == w {
				f.Refusals = o.refusals
				f.Converged = f.Converged && o.done
			}
		}
		s.res.Workloads = append(s.res.Workloads, *f)
	}
}

// rolledOut is every pod on the current template (below a StatefulSet's partition, any)
// and Ready, as many as wanted.
func rolledOut(s *sim, w *simWorkload) bool {
	want := w.k.Wanted()
	n := 0
	for _, p := range w.k.Pods {
		// A StatefulSet's ordinals below its partition keep their revision.
		below := w.ref.Kind == v1alpha1.KindStatefulSet && !w.k.OnDelete && p.Slot < w.k.Partition
		if (p.Template != w.k.Template && !below) || !s.ready(p) {
			return false
		}
		n++
	}
	return n == want
}
