package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

const (
	// TemplateLabel numbers a pod template within its sequence.
	TemplateLabel = "replay.holdfast.dev/template"
	// NamespaceLabel marks the replay's namespaces.
	NamespaceLabel = "replay.holdfast.dev/sequence"
	name           = "w"
	// stable is how long pods per template must stay the same for a quiescent point.
	stable = 2 * time.Second
)

// stageAnnotations keep kwok's pod stages out of readiness (pod-ready delayed by a day:
// Kube sets Ready as the sequence says) and make its create and delete stages immediate.
var stageAnnotations = map[string]string{
	"pod-ready.stage.kwok.x-k8s.io/delay":         "24h",
	"pod-ready.stage.kwok.x-k8s.io/jitter-delay":  "24h",
	"pod-create.stage.kwok.x-k8s.io/delay":        "0s",
	"pod-create.stage.kwok.x-k8s.io/jitter-delay": "0s",
	"pod-delete.stage.kwok.x-k8s.io/delay":        "0s",
}

// Kube plays sequences on a cluster of kube's controllers and kwok's nodes: it applies
// each step to the workload of the sequence's namespace, sets its pods' Ready condition
// as the step says (kwok's own pod-ready stage is kept off these pods), and observes each
// quiescent point through informers.
type Kube struct {
	cs    kubernetes.Interface
	nodes []string
	// StepTimeout bounds the wait for a quiescent point.
	StepTimeout time.Duration

	mu     sync.Mutex
	broken map[string][]int // by namespace
	// slots are, by namespace, the node each DaemonSet slot stands for.
	slots map[string][]string

	pods      corelisters.PodLister
	sets      appslisters.ReplicaSetLister
	revisions appslisters.ControllerRevisionLister
	deploys   appslisters.DeploymentLister
	stss      appslisters.StatefulSetLister
	dss       appslisters.DaemonSetLister
}

// NewKube starts the informers and the readiness driver until ctx ends. nodes are the
// node names a DaemonSet's slots stand for (at least Nodes).
func NewKube(ctx context.Context, cs kubernetes.Interface, nodes []string) (*Kube, error) {
	if len(nodes) < Nodes {
		return nil, fmt.Errorf("%d nodes, want %d", len(nodes), Nodes)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	k := &Kube{cs: cs, nodes: nodes, StepTimeout: 90 * time.Second, broken: map[string][]int{}, slots: map[string][]string{},
		pods: f.Core().V1().Pods().Lister(), sets: f.Apps().V1().ReplicaSets().Lister(),
		revisions: f.Apps().V1().ControllerRevisions().Lister(), deploys: f.Apps().V1().Deployments().Lister(),
		stss: f.Apps().V1().StatefulSets().Lister(), dss: f.Apps().V1().DaemonSets().Lister()}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer of %v never synced", typ)
		}
	}
	go k.drive(ctx)
	return k, nil
}

// drive sets each pod's Ready condition as its template's readiness says, once kwok's
// create stage has given it an IP.
func (k *Kube) drive(ctx context.Context) {
	sel := labels.SelectorFromSet(nil)
	req, _ := labels.NewRequirement(TemplateLabel, "exists", nil)
	sel = sel.Add(*req)
	for ctx.Err() == nil {
		pods, _ := k.pods.List(sel)
		for _, p := range pods {
			if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
				continue
			}
			want := !k.isBroken(p)
			if want == ready(p) {
				continue
			}
			q := p.DeepCopy()
			setReady(q, want)
			_, _ = k.cs.CoreV1().Pods(q.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (k *Kube) isBroken(p *corev1.Pod) bool {
	t, err := strconv.Atoi(p.Labels[TemplateLabel])
	if err != nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.broken[p.Namespace], t)
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setReady writes what a kubelet would for a running pod whose readiness probe passes or
// fails: phase Running, Ready and ContainersReady, the containers running.
func setReady(p *corev1.Pod, on bool) {
	now := metav1.Now()
	status := corev1.ConditionFalse
	if on {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == typ })
		if i < 0 {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ})
			i = len(p.Status.Conditions) - 1
		}
		p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = status, now
		p.Status.Conditions[i].Reason, p.Status.Conditions[i].Message = "", ""
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			Ready: on, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
}

// PoolLabel is the node label of a namespace's DaemonSet pool.
func PoolLabel(ns string) string { return "replay.holdfast.dev/" + ns }

// Play runs seq in namespace ns (which exists): each step applied, then its quiescent
// point observed. An error is a failure to act on the cluster, not a difference.
func (k *Kube) Play(ctx context.Context, seq Sequence, ns string) ([]Point, error) {
	k.mu.Lock()
	k.slots[ns] = slices.Clone(k.nodes[:Nodes])
	k.mu.Unlock()
	// The nodes are the test bed's: out of the pool again at the end, as far as it goes.
	defer func() { _ = k.setPool(context.Background(), ns, nil) }()
	var out []Point
	for i, st := range seq.Steps {
		k.mu.Lock()
		k.broken[ns] = slices.Clone(st.Spec.Broken)
		k.mu.Unlock()
		if v := st.Leave; v != nil {
			k.align(ns, *v, seq.Steps[i-1].Spec.Nodes)
		}
		if v := st.Delete; v != nil && st.Spec.Kind == v1alpha1.KindDaemonSet {
			k.align(ns, *v, st.Spec.Nodes)
		}
		if err := k.setPool(ctx, ns, st.Spec.Nodes); err != nil {
			return out, err
		}
		if err := k.apply(ctx, ns, st.Spec, i == 0); err != nil {
			return out, fmt.Errorf("%s step %d (%s): %w", seq.Name, i, st.Op, err)
		}
		if st.Delete != nil {
			if err := k.deletePod(ctx, ns, st.Spec.Kind, *st.Delete); err != nil {
				return out, fmt.Errorf("%s step %d: %w", seq.Name, i, err)
			}
		}
		p, err := k.quiesce(ctx, ns, st.Spec.Kind, st.Spec.Nodes)
		if err != nil {
			return out, fmt.Errorf("%s step %d: %w", seq.Name, i, err)
		}
		out = append(out, p)
		if !p.Quiescent {
			break
		}
	}
	return out, nil
}

// align makes v's slot stand for a node of the pool (pool: its slots) whose DaemonSet pod
// runs v's template, swapping two slots of the pool: the nodes are alike.
func (k *Kube) align(ns string, v Victim, pool []int) {
	if v.Template < 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	slots := k.slots[ns]
	pods, _ := k.pods.Pods(ns).List(labels.Everything())
	template := map[string]string{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			template[p.Spec.NodeName] = p.Labels[TemplateLabel]
		}
	}
	want := strconv.Itoa(v.Template)
	if template[slots[v.Slot]] == want {
		return
	}
	for _, s := range pool {
		if template[slots[s]] == want {
			slots[s], slots[v.Slot] = slots[v.Slot], slots[s]
			return
		}
	}
}

// setPool labels the nodes of slots (and only those) into the namespace's pool.
func (k *Kube) setPool(ctx context.Context, ns string, slots []int) error {
	key := PoolLabel(ns)
	k.mu.Lock()
	nodes := slices.Clone(k.slots[ns])
	k.mu.Unlock()
	for i, node := range nodes {
		in := slices.Contains(slots, i)
		n, err := k.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, has := n.Labels[key]; has == in {
			continue
		}
		value := "null"
		if in {
			value = `"true"`
		}
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, key, value)
		if _, err := k.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func podTemplate(ns string, s Spec) corev1.PodTemplateSpec {
	t := strconv.Itoa(s.Template)
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, TemplateLabel: t}, Annotations: maps.Clone(stageAnnotations)},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.example/replay:" + t}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if s.Kind == v1alpha1.KindDaemonSet {
		tpl.Spec.NodeSelector = map[string]string{PoolLabel(ns): "true"}
	}
	return tpl
}

// apply writes the workload as s says: created on the first step, updated (read again on
// a conflict) on the others.
func (k *Kube) apply(ctx context.Context, ns string, s Spec, create bool) error {
	apps := k.cs.AppsV1()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	switch s.Kind {
	case v1alpha1.KindDeployment:
		fill := func(d *appsv1.Deployment) {
			d.Spec.Replicas, d.Spec.Template = ptr.To(int32(s.Replicas)), podTemplate(ns, s)
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			if !s.Recreate {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt(s.MaxSurge)), MaxUnavailable: ptr.To(intstr.FromInt(s.MaxUnavailable))}}
			}
		}
		if create {
			d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: sel}}
			fill(d)
			_, err := apps.Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
			return err
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fill(d)
			_, err = apps.Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
	case v1alpha1.KindStatefulSet:
		fill := func(o *appsv1.StatefulSet) {
			o.Spec.Replicas, o.Spec.Template = ptr.To(int32(s.Replicas)), podTemplate(ns, s)
			o.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			if !s.OnDelete {
				o.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(s.Partition)), MaxUnavailable: ptr.To(intstr.FromInt(s.MaxUnavailable))}}
			}
		}
		if create {
			o := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: sel, ServiceName: name,
				PodManagementPolicy: appsv1.OrderedReadyPodManagement}}
			if s.Parallel {
				o.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
			}
			fill(o)
			_, err := apps.StatefulSets(ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			o, err := apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fill(o)
			_, err = apps.StatefulSets(ns).Update(ctx, o, metav1.UpdateOptions{})
			return err
		})
	default:
		fill := func(o *appsv1.DaemonSet) {
			o.Spec.Template = podTemplate(ns, s)
			o.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			if !s.OnDelete {
				o.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt(s.MaxUnavailable)), MaxSurge: ptr.To(intstr.FromInt(0))}}
			}
		}
		if create {
			o := &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel}}
			fill(o)
			_, err := apps.DaemonSets(ns).Create(ctx, o, metav1.CreateOptions{})
			return err
		}
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			o, err := apps.DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fill(o)
			_, err = apps.DaemonSets(ns).Update(ctx, o, metav1.UpdateOptions{})
			return err
		})
	}
}

// deletePod deletes the victim: a StatefulSet's ordinal, the pod on a DaemonSet's node
// slot, or the first by name of a Deployment's pods of the template. None: nothing.
func (k *Kube) deletePod(ctx context.Context, ns string, kind v1alpha1.WorkloadKind, v Victim) error {
	pods, err := k.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		match := false
		switch kind {
		case v1alpha1.KindDeployment:
			match = p.Labels[TemplateLabel] == strconv.Itoa(v.Template)
		case v1alpha1.KindStatefulSet:
			match = p.Name == fmt.Sprintf("%s-%d", name, v.Slot)
		default:
			k.mu.Lock()
			match = p.Spec.NodeName == k.slots[ns][v.Slot]
			k.mu.Unlock()
		}
		if match {
			if err := k.cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}
	}
	return nil
}

// quiesce waits for a quiescent point: the workload's status observes its generation,
// no pod is terminating or waiting for kwok or its readiness, and the observation stays
// the same for 2 s.
func (k *Kube) quiesce(ctx context.Context, ns string, kind v1alpha1.WorkloadKind, nodes []int) (Point, error) {
	deadline := time.Now().Add(k.StepTimeout)
	var last Observation
	var since time.Time
	for {
		o, settled, err := k.observe(ns, kind, nodes)
		if err != nil {
			return Point{}, err
		}
		now := time.Now()
		switch {
		case !settled:
			since = time.Time{}
		case since.IsZero() || !o.Equal(last):
			last, since = o, now
		case now.Sub(since) >= stable:
			return Point{Kube: o, Quiescent: true}, nil
		}
		if now.After(deadline) {
			return Point{Kube: o}, nil
		}
		select {
		case <-ctx.Done():
			return Point{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// observe reads the namespace's workload through kube's identities: a pod's template is
// the ReplicaSet of its pod-template-hash or the ControllerRevision of its
// controller-revision-hash, mapped to the sequence's template number that revision's
// template carries; an error when a pod's own template label says otherwise.
//
// Settled also asks that the workload's status (a Deployment's ReplicaSets' too) counts
// the pods there are and the Ready ones, and that a DaemonSet's desiredNumberScheduled is
// its pool: the controller has synced since the last pod or node changed.
func (k *Kube) observe(ns string, kind v1alpha1.WorkloadKind, nodes []int) (Observation, bool, error) {
	o := Observation{Pods: map[int]int{}, Revisions: map[int]int64{}, Current: -1}
	settled := true
	byHash := map[string]int{}
	current := "" // a StatefulSet's status.currentRevision
	var setList []*appsv1.ReplicaSet
	// counts reports whether the workload's status (and its ReplicaSets') counts the pods
	// not terminating and the Ready ones, by hash: the controller has seen them all.
	var counts func(pods, ready int, byHash map[string][2]int) bool
	switch kind {
	case v1alpha1.KindDeployment:
		d, err := k.deploys.Deployments(ns).Get(name)
		if err != nil {
			return o, false, nil
		}
		settled = d.Status.ObservedGeneration == d.Generation
		counts = func(pods, ready int, byHash map[string][2]int) bool {
			if d.Status.Replicas != int32(pods) || d.Status.ReadyReplicas != int32(ready) {
				return false
			}
			for _, rs := range setList {
				n := byHash[rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]]
				if rs.Status.ObservedGeneration != rs.Generation || rs.Status.Replicas != int32(n[0]) || rs.Status.ReadyReplicas != int32(n[1]) {
					return false
				}
			}
			return true
		}
		sets, err := k.sets.ReplicaSets(ns).List(labels.Everything())
		if err != nil {
			return o, false, err
		}
		setList = sets
		for _, rs := range sets {
			t, err := strconv.Atoi(rs.Spec.Template.Labels[TemplateLabel])
			if err != nil {
				return o, false, fmt.Errorf("ReplicaSet %s/%s: no template number", ns, rs.Name)
			}
			byHash[rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]] = t
			rev, err := strconv.ParseInt(rs.Annotations["deployment.kubernetes.io/revision"], 10, 64)
			if err != nil {
				settled = false
				continue
			}
			o.Revisions[t] = rev
		}
	default:
		if kind == v1alpha1.KindStatefulSet {
			s, err := k.stss.StatefulSets(ns).Get(name)
			if err != nil {
				return o, false, nil
			}
			settled = s.Status.ObservedGeneration == s.Generation
			current = s.Status.CurrentRevision
			counts = func(pods, ready int, _ map[string][2]int) bool {
				return s.Status.Replicas == int32(pods) && s.Status.ReadyReplicas == int32(ready)
			}
		} else {
			s, err := k.dss.DaemonSets(ns).Get(name)
			if err != nil {
				return o, false, nil
			}
			settled = s.Status.ObservedGeneration == s.Generation
			counts = func(pods, ready int, _ map[string][2]int) bool {
				// Every node of the pool has its pod: with nodes that take pods, the
				// controller is not done before.
				return s.Status.DesiredNumberScheduled == int32(len(nodes)) && s.Status.CurrentNumberScheduled == s.Status.DesiredNumberScheduled &&
					s.Status.CurrentNumberScheduled+s.Status.NumberMisscheduled == int32(pods) &&
					s.Status.NumberReady == int32(ready)
			}
		}
		revs, err := k.revisions.ControllerRevisions(ns).List(labels.Everything())
		if err != nil {
			return o, false, err
		}
		for _, cr := range revs {
			var data struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
				return o, false, fmt.Errorf("ControllerRevision %s/%s: %w", ns, cr.Name, err)
			}
			t, err := strconv.Atoi(data.Spec.Template.Labels[TemplateLabel])
			if err != nil {
				return o, false, fmt.Errorf("ControllerRevision %s/%s: no template number", ns, cr.Name)
			}
			byHash[cr.Name] = t
			byHash[cr.Labels[appsv1.ControllerRevisionHashLabelKey]] = t
			o.Revisions[t] = cr.Revision
		}
	}
	if kind == v1alpha1.KindStatefulSet {
		if t, ok := byHash[current]; ok {
			o.Current = t
		} else {
			settled = false
		}
	}
	pods, err := k.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return o, false, err
	}
	key := appsv1.ControllerRevisionHashLabelKey
	if kind == v1alpha1.KindDeployment {
		key = appsv1.DefaultDeploymentUniqueLabelKey
	}
	live, readyPods, perHash := 0, 0, map[string][2]int{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			n := perHash[p.Labels[key]]
			n[0]++
			live++
			if ready(p) {
				n[1]++
				readyPods++
			}
			perHash[p.Labels[key]] = n
		}
		t, ok := byHash[p.Labels[key]]
		if !ok {
			settled = false // its revision is not in the cache yet
			continue
		}
		if own := p.Labels[TemplateLabel]; own != strconv.Itoa(t) {
			return o, false, fmt.Errorf("pod %s/%s of template %s has kube's identity of template %d", ns, p.Name, own, t)
		}
		o.Pods[t]++
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || ready(p) == k.isBroken(p) {
			settled = false
		}
	}
	if counts != nil && !counts(live, readyPods, perHash) {
		settled = false
	}
	return o, settled, nil
}
