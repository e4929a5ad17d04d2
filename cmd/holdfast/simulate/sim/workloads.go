package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/kubemodel"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

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
	triedAt int
	uid     types.UID
	fig     *WorkloadFigures
	// writer is the field manager that last changed its template, "" when none named one.
	writer    string
	evictedAt []time.Time
	// disruptions are its evicted pods' node labels and times, for the domains they disrupt.
	disruptions []disruption
	dirty       bool
	// journalDue is a change the journal recorder has not seen; sampled, figures taken.
	journalDue, sampled bool
	// serving is every wanted pod having served at once, at some point.
	serving bool
	// expected is how many pods should serve: on a scale up, the old count until the new
	// one first serves.
	expected int
	minReady time.Duration
	// op is its operator, if an apply drives it; convergedAt is when it last became
	// converged (rolled out, its operator done), zero while it is not.
	op          *operator
	convergedAt time.Time
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
		// The API server defaults both to 25%; Recreate takes every pod down first.
		quarter := intstr.FromString("25%")
		surge, unavailable := cmp.Or(v.Strategy.MaxSurge, &quarter), cmp.Or(v.Strategy.MaxUnavailable, &quarter)
		sv, uv := policy.Fenceposts(surge, unavailable, int32(k.Replicas))
		k.MaxSurge, k.MaxUnavailable, k.Recreate = int(sv), int(uv), !v.Strategy.Rolling
	case *appsv1.StatefulSet:
		k.OrderedReady = o.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			k.Partition = int(ptr.Deref(ru.Partition, 0))
			if ru.MaxUnavailable != nil {
				// getStatefulSetMaxUnavailable: rounded down, at least one.
				n, _ := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, k.Replicas, false)
				k.MaxUnavailable = max(n, 1)
			}
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

// disruption is an evicted pod: its node's labels and when it was evicted.
type disruption struct {
	labels map[string]string
	at     time.Time
}
