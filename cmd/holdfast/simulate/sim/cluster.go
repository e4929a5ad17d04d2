package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

type node struct {
	obj   *corev1.Node
	index int
	pods  []*corev1.Pod // bound to it, terminating included
}

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
			if rp, ok := obj.(*v1alpha1.RolloutPolicy); ok {
				s.rolloutPols = true
				if rw := rp.Spec.Rules.RevertWindow; rw != nil && rw.Duration > s.revertWindow {
					s.revertWindow = rw.Duration
				}
			}
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
	for i, st := range s.sc.Spec.Timeline {
		at := fmt.Sprintf("%s: spec.timeline[%d]", s.sc.Source, i)
		for _, name := range nodesOf(st) {
			if s.nodeByNam[name] == nil {
				return fmt.Errorf("%s at %s: no node %s in the scenario", at, st.At.Duration, name)
			}
		}
		if a := st.Apply; a != nil {
			ref := refOf(a.Workload)
			namespaces[ref.Namespace] = true
			if s.byRef[ref] == nil && a.Template == nil && !s.createdEarlier(ref, st) {
				return fmt.Errorf("%s.apply at %s: %s does not exist yet: its first apply needs a template", at, st.At.Duration, ref)
			}
			if s.byRef[ref] != nil && a.Template != nil {
				obj := s.byRef[ref].obj.DeepCopyObject().(client.Object)
				applyTo(obj, a)
				if err := selects(obj); err != nil {
					return fmt.Errorf("%s.apply at %s: %s: %w", at, st.At.Duration, ref, err)
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
func (s *sim) createdEarlier(ref workload.Ref, st scenariov1alpha1.Step) bool {
	for _, prev := range s.sc.Spec.Timeline {
		if prev.Apply != nil && refOf(prev.Apply.Workload) == ref && prev.Apply.Template != nil && prev.At.Duration <= st.At.Duration {
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

func nodesOf(st scenariov1alpha1.Step) []string {
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
