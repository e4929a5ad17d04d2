package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func deploymentRollout(d *appsv1.Deployment) Rollout {
	want := replicasOrOne(d.Spec.Replicas)
	s := d.Status
	r := Rollout{
		Paused:   d.Spec.Paused,
		Progress: fmt.Sprintf("%d/%d updated, %d/%d available, %d in all", s.UpdatedReplicas, want, s.AvailableReplicas, want, s.Replicas),
	}
	if s.ObservedGeneration < d.Generation {
		r.Progress = fmt.Sprintf("generation %d not yet acted on by the Deployment controller", d.Generation)
	}
	r.InProgress = s.ObservedGeneration < d.Generation ||
		s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > s.UpdatedReplicas
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			r.DeadlineExceeded = true
		}
	}
	return r
}

func statefulSetRollout(s *appsv1.StatefulSet) Rollout {
	want := replicasOrOne(s.Spec.Replicas)
	r := Rollout{OnDelete: s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType}
	// Pods at or above the partition's ordinal are updated; those below keep the old revision
	// by design, so the rollout is complete once the pods at or above it are updated.
	target := want
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		target = max(0, want-*ru.Partition)
	}
	st := s.Status
	r.Progress = fmt.Sprintf("%d/%d updated, %d/%d ready", st.UpdatedReplicas, target, st.ReadyReplicas, want)
	r.InProgress = st.ObservedGeneration < s.Generation ||
		(st.UpdateRevision != st.CurrentRevision && st.UpdatedReplicas < target)
	return r
}

func daemonSetRollout(d *appsv1.DaemonSet) Rollout {
	st := d.Status
	want := st.DesiredNumberScheduled
	return Rollout{
		OnDelete: d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType,
		Progress: fmt.Sprintf("%d/%d updated, %d/%d available", st.UpdatedNumberScheduled, want, st.NumberAvailable, want),
		InProgress: st.ObservedGeneration < d.Generation ||
			st.UpdatedNumberScheduled < want || st.NumberAvailable < want,
	}
}

func replicasOrOne(r *int32) int32 {
	if r == nil {
		return 1 // the API server's default
	}
	return *r
}

func deploymentStrategy(d *appsv1.Deployment) Strategy {
	s := Strategy{Rolling: d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType,
		MinReadySeconds: d.Spec.MinReadySeconds, Scale: replicasOrOne(d.Spec.Replicas)}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		s.MaxUnavailable, s.MaxSurge = ru.MaxUnavailable, ru.MaxSurge
	}
	return s
}

func statefulSetStrategy(st *appsv1.StatefulSet) Strategy {
	s := Strategy{Rolling: st.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType,
		MinReadySeconds: st.Spec.MinReadySeconds, Scale: replicasOrOne(st.Spec.Replicas)}
	if ru := st.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		s.MaxUnavailable = ru.MaxUnavailable
	}
	if s.Rolling && s.MaxUnavailable == nil {
		one := intstr.FromInt32(1) // StatefulSets replace one pod at a time unless told otherwise
		s.MaxUnavailable = &one
	}
	return s
}

func daemonSetStrategy(d *appsv1.DaemonSet) Strategy {
	s := Strategy{Rolling: d.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType,
		MinReadySeconds: d.Spec.MinReadySeconds, Scale: d.Status.DesiredNumberScheduled}
	if ru := d.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		s.MaxUnavailable, s.MaxSurge = ru.MaxUnavailable, ru.MaxSurge
	}
	return s
}
