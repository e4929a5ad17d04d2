package workload

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Progress is how far a rollout has come. It is formatted when a message is written
// ("2/3 updated, 1/3 available, 4 in all"), not when a workload is read.
type Progress struct {
	Kind v1alpha1.WorkloadKind
	// Unobserved is a generation the workload's controller has not acted on yet; 0 once it
	// has (until then Updated counts the pods of an earlier template).
	Unobserved int64
	// Updated of Target replicas run the current revision; Available of Want are available
	// (Ready, for StatefulSets); a Deployment has Total replicas in all.
	Updated, Target, Available, Want, Total int32
}

// String implements fmt.Stringer.
func (p Progress) String() string {
	switch {
	case p.Kind == v1alpha1.KindDeployment && p.Unobserved > 0:
		return fmt.Sprintf("generation %d not yet acted on by the Deployment controller", p.Unobserved)
	case p.Kind == v1alpha1.KindDeployment:
		return fmt.Sprintf("%d/%d updated, %d/%d available, %d in all", p.Updated, p.Target, p.Available, p.Want, p.Total)
	case p.Kind == v1alpha1.KindStatefulSet:
		return fmt.Sprintf("%d/%d updated, %d/%d ready", p.Updated, p.Target, p.Available, p.Want)
	default:
		return fmt.Sprintf("%d/%d updated, %d/%d available", p.Updated, p.Target, p.Available, p.Want)
	}
}

func deploymentRollout(l *Lean) Rollout {
	want := l.Spec.Replicas.or(1) // the API server's default
	s := &l.Status
	r := Rollout{
		Paused:           l.Spec.Paused,
		Held:             l.Spec.Paused,
		DeadlineExceeded: bool(s.Conditions),
		// The API server defaults it to 600 s (pkg/apis/apps/v1/defaults.go).
		ProgressDeadline: time.Duration(l.Spec.ProgressDeadlineSeconds.or(600)) * time.Second,
		Progress: Progress{Kind: v1alpha1.KindDeployment, Updated: s.UpdatedReplicas, Target: want,
			Available: s.AvailableReplicas, Want: want, Total: s.Replicas},
	}
	if s.ObservedGeneration < l.Metadata.Generation {
		r.Progress.Unobserved = l.Metadata.Generation
	}
	r.Fresh = s.ObservedGeneration == 0
	r.InProgress = s.ObservedGeneration < l.Metadata.Generation ||
		s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > s.UpdatedReplicas
	r.Mixed = s.ObservedGeneration < l.Metadata.Generation || s.Replicas > s.UpdatedReplicas
	return r
}

func statefulSetRollout(l *Lean) Rollout {
	want := l.Spec.Replicas.or(1)
	r := Rollout{OnDelete: l.Spec.UpdateStrategy.Type == string(appsv1.OnDeleteStatefulSetStrategyType)}
	// Pods at or above the partition's ordinal are updated; those below keep the old revision
	// by design, so the rollout is complete once the pods at or above it are updated.
	target := want
	if p := l.Spec.UpdateStrategy.RollingUpdate.Partition; p.isSet {
		target = max(0, want-p.v)
	}
	r.Held = r.OnDelete || target == 0
	st := &l.Status
	r.Progress = Progress{Kind: v1alpha1.KindStatefulSet, Updated: st.UpdatedReplicas, Target: target, Available: st.ReadyReplicas, Want: want,
		Total: st.Replicas}
	if st.ObservedGeneration < l.Metadata.Generation {
		r.Progress.Unobserved = l.Metadata.Generation
	}
	r.Fresh = st.ObservedGeneration == 0
	// Finished also needs every replica Ready: the controller updates the last pod before
	// it is Ready. A status naming one revision current and update is no finished rollout
	// while pods at or above the partition run another: a StatefulSet created over pods it
	// adopts takes its update revision as current at once (getStatefulSetRevisions) and
	// replaces them all the same (updateStatefulSet's rolling update). A scale down counts
	// its condemned ordinals (at or above the replicas) until they are gone, updated ones
	// among them: the pods counted past the replicas may all be updated ones, so they do not
	// count towards the target (without a partition, every pod counted must be updated, as
	// kube's completeRollingUpdate asks before it names the update revision current), else
	// updated and ready reach the replicas while a pod of the old revision still runs below.
	condemned := max(0, st.Replicas-want)
	r.InProgress = st.ObservedGeneration < l.Metadata.Generation || st.UpdatedReplicas-condemned < target || st.ReadyReplicas < want
	r.Mixed = st.ObservedGeneration < l.Metadata.Generation || st.Replicas > st.UpdatedReplicas
	r.CurrentIsUpdate = st.CurrentRevision != "" && st.CurrentRevision == st.UpdateRevision
	r.CurrentRevision, r.CurrentPods = st.CurrentRevision, st.CurrentReplicas
	return r
}

func daemonSetRollout(l *Lean) Rollout {
	st := &l.Status
	want := st.DesiredNumberScheduled
	onDelete := l.Spec.UpdateStrategy.Type == string(appsv1.OnDeleteDaemonSetStrategyType)
	var unobserved int64
	if st.ObservedGeneration < l.Metadata.Generation {
		unobserved = l.Metadata.Generation
	}
	return Rollout{
		OnDelete: onDelete,
		Held:     onDelete,
		Fresh:    st.ObservedGeneration == 0,
		Progress: Progress{Kind: v1alpha1.KindDaemonSet, Updated: st.UpdatedNumberScheduled, Target: want, Available: st.NumberAvailable, Want: want,
			Total: st.CurrentNumberScheduled, Unobserved: unobserved},
		InProgress: st.ObservedGeneration < l.Metadata.Generation ||
			st.UpdatedNumberScheduled < want || st.NumberAvailable < want,
		// A node without a pod runs no template: only a node whose oldest pod is not of the
		// template (kube's updateDaemonSetStatus counts that one) shows another template.
		Mixed: st.ObservedGeneration < l.Metadata.Generation || st.UpdatedNumberScheduled < st.CurrentNumberScheduled,
	}
}

func deploymentStrategy(l *Lean) Strategy {
	ru := &l.Spec.Strategy.RollingUpdate
	return Strategy{Rolling: l.Spec.Strategy.Type != string(appsv1.RecreateDeploymentStrategyType),
		MinReadySeconds: l.Spec.MinReadySeconds,
		MaxUnavailable:  ru.MaxUnavailable.ptr(), MaxSurge: ru.MaxSurge.ptr()}
}

func statefulSetStrategy(l *Lean) Strategy {
	s := Strategy{Rolling: l.Spec.UpdateStrategy.Type != string(appsv1.OnDeleteStatefulSetStrategyType),
		MinReadySeconds: l.Spec.MinReadySeconds,
		MaxUnavailable:  l.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.ptr()}
	if s.Rolling && s.MaxUnavailable == nil {
		one := intstr.FromInt32(1) // StatefulSets replace one pod at a time unless told otherwise
		s.MaxUnavailable = &one
	}
	return s
}

func daemonSetStrategy(l *Lean) Strategy {
	ru := &l.Spec.UpdateStrategy.RollingUpdate
	return Strategy{Rolling: l.Spec.UpdateStrategy.Type != string(appsv1.OnDeleteDaemonSetStrategyType),
		MinReadySeconds: l.Spec.MinReadySeconds,
		MaxUnavailable:  ru.MaxUnavailable.ptr(), MaxSurge: ru.MaxSurge.ptr()}
}
