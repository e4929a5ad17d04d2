package workload

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is what decisions read of a pod.
type Pod struct {
	Name  string
	UID   types.UID
	Phase corev1.PodPhase
	// Ready is the pod's Ready condition; ReadySince is when it last became true.
	Ready       bool
	ReadySince  time.Time
	Terminating bool
	// Created is the pod's creation; Node the node it is bound to ("" while unscheduled):
	// what a topology budget reads to tell replacements and domains.
	Created time.Time
	Node    string
}

// PodOf reads a pod as decisions read it.
func PodOf(p *corev1.Pod) Pod {
	s := Pod{Name: p.Name, UID: p.UID, Phase: p.Status.Phase, Terminating: p.DeletionTimestamp != nil,
		Created: p.CreationTimestamp.Time, Node: p.Spec.NodeName}
	if c := readyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
		s.Ready, s.ReadySince = true, c.LastTransitionTime.Time
	}
	return s
}

// Serving reports a pod that is Ready and not terminating.
func (p Pod) Serving() bool { return p.Ready && !p.Terminating }

// Available reports a pod that has served for at least minReady at now.
func (p Pod) Available(minReady time.Duration, now time.Time) bool {
	return p.Serving() && !p.ReadySince.Add(minReady).After(now)
}

// PodServing reports a pod that is Ready and not terminating (Pod.Serving), without
// reading the rest of it.
func PodServing(p *corev1.Pod) bool {
	c := readyCondition(p)
	return p.DeletionTimestamp == nil && c != nil && c.Status == corev1.ConditionTrue
}

// PodEnded reports a pod whose containers have all ended for good (Succeeded or Failed):
// until then, terminating or not, the pod runs its template.
func PodEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func readyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// LastActivity is the newest pod creation or Ready transition among pods.
func LastActivity(pods []corev1.Pod) time.Time {
	var last time.Time
	for i := range pods {
		p := &pods[i]
		last = later(last, p.CreationTimestamp)
		if c := readyCondition(p); c != nil {
			last = later(last, c.LastTransitionTime)
		}
	}
	return last
}

func later(t time.Time, m metav1.Time) time.Time {
	if m.After(t) {
		return m.Time
	}
	return t
}

// ControlledBy reports whether owner is the controller among refs.
func ControlledBy(refs []metav1.OwnerReference, owner types.UID) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.UID == owner {
			return true
		}
	}
	return false
}
