package workload

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// rolloutOf is what From reads of a typed workload's rollout.
func rolloutOf(t *testing.T, obj runtime.Object) Rollout {
	t.Helper()
	w, err := From(obj)
	if err != nil {
		t.Fatal(err)
	}
	return w.Rollout
}

func TestDeploymentRollout(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
	if r := rolloutOf(t, d); r.InProgress {
		t.Errorf("complete rollout reported in progress: %+v", r)
	}
	if r := rolloutOf(t, d); r.Mixed {
		t.Errorf("every pod updated reported mixed: %+v", r)
	}
	d.Status.Replicas = 4 // an old pod still terminating its way out
	if r := rolloutOf(t, d); !r.InProgress || !r.Mixed {
		t.Error("rollout with an old replica left must be in progress, and mixed")
	}
	d.Status.Replicas, d.Generation = 3, 3
	if r := rolloutOf(t, d); !r.InProgress || !r.Mixed {
		t.Error("unobserved generation must be in progress, and may be mixed")
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	if r := rolloutOf(t, d); !r.DeadlineExceeded || r.ProgressDeadline != 600*time.Second {
		t.Errorf("ProgressDeadlineExceeded not seen, or its deadline not kube's default of 600 s: %+v", r)
	}
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](1)
	if r := rolloutOf(t, d); r.ProgressDeadline != time.Second {
		t.Errorf("progressDeadlineSeconds 1 read as %s", r.ProgressDeadline)
	}
}

func TestStatefulSetRolloutPartition(t *testing.T) {
	s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5),
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)}}}}
	s.Status = appsv1.StatefulSetStatus{CurrentRevision: "a", UpdateRevision: "b", Replicas: 5, UpdatedReplicas: 1}
	if r := rolloutOf(t, s); !r.InProgress || !r.Mixed {
		t.Error("1 of 2 pods above the partition updated: in progress, mixed")
	}
	s.Status.UpdatedReplicas = 2
	if r := rolloutOf(t, s); !r.InProgress {
		t.Errorf("pods above the partition all updated, not all Ready: in progress, got %+v", r)
	}
	s.Status.ReadyReplicas = 5
	if r := rolloutOf(t, s); r.InProgress || r.Held {
		t.Errorf("pods above the partition all updated and every pod Ready: done, got %+v", r)
	}
	s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](5)
	if r := rolloutOf(t, s); !r.Held {
		t.Error("a partition at the replicas holds every pod: held")
	}
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	if r := rolloutOf(t, s); !r.OnDelete {
		t.Error("OnDelete not seen")
	}
}

func TestDaemonSetRollout(t *testing.T) {
	d := &appsv1.DaemonSet{}
	d.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 6, CurrentNumberScheduled: 6, UpdatedNumberScheduled: 6, NumberAvailable: 5}
	if r := rolloutOf(t, d); !r.InProgress || r.Mixed {
		t.Errorf("one updated pod not yet available: in progress, not mixed; got %+v", r)
	}
	d.Status.UpdatedNumberScheduled = 5
	if r := rolloutOf(t, d); !r.Mixed {
		t.Error("a node still runs an older pod: mixed")
	}
	d.Status.CurrentNumberScheduled = 5
	if r := rolloutOf(t, d); r.Mixed || !r.InProgress {
		t.Errorf("a node without a pod runs no older one: in progress, not mixed; got %+v", r)
	}
	d.Status.CurrentNumberScheduled = 6
	d.Status.UpdatedNumberScheduled = 6
	d.Status.NumberAvailable = 6
	if r := rolloutOf(t, d); r.InProgress {
		t.Error("all updated and available: done")
	}
}

func TestProgressString(t *testing.T) {
	for want, p := range map[string]Progress{
		"2/3 updated, 1/3 available, 4 in all":                       {Kind: v1alpha1.KindDeployment, Updated: 2, Target: 3, Available: 1, Want: 3, Total: 4},
		"generation 7 not yet acted on by the Deployment controller": {Kind: v1alpha1.KindDeployment, Unobserved: 7, Updated: 3, Target: 3},
		"1/2 updated, 4/5 ready":                                     {Kind: v1alpha1.KindStatefulSet, Updated: 1, Target: 2, Available: 4, Want: 5},
		"5/6 updated, 6/6 available":                                 {Kind: v1alpha1.KindDaemonSet, Updated: 5, Target: 6, Available: 6, Want: 6},
	} {
		if got := p.String(); got != want {
			t.Errorf("%+v reads %q, want %q", p, got, want)
		}
	}
}

// A StatefulSet created over pods it adopts names its update revision current at once
// (kube's getStatefulSetRevisions) and replaces the adopted pods all the same: that status
// is a rollout in progress, not a finished one.
func TestStatefulSetCreatedOverAdoptedPodsRollsOut(t *testing.T) {
	s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
	s.Generation = 1
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3,
		CurrentRevision: "kas-b", UpdateRevision: "kas-b"}
	if r := rolloutOf(t, s); !r.InProgress || !r.CurrentIsUpdate {
		t.Errorf("1 of 3 pods on the update revision: in progress, its template current; got %+v", r)
	}
}

// A scale down counts its condemned ordinals until they are gone: with ordinals 1 to 3
// updated and Ready and ordinal 0 still on the old revision, updated and ready reach the
// new replicas (2) while a pod of the old revision runs. kube's completeRollingUpdate
// names the update revision current only once every counted pod is updated and Ready; so
// is the rollout finished here, not before. Under a partition the pods below it keep the
// old revision by design, and the condemned do not count towards those at or above it.
func TestStatefulSetScaledDownMidRolloutIsInProgress(t *testing.T) {
	s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
	s.Generation = 3
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 4,
		CurrentRevision: "kas-a", UpdateRevision: "kas-b"}
	if r := rolloutOf(t, s); !r.InProgress {
		t.Errorf("4 pods counted, 3 updated: in progress, got %+v", r)
	}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2,
		CurrentRevision: "kas-b", UpdateRevision: "kas-b"}
	if r := rolloutOf(t, s); r.InProgress {
		t.Errorf("every pod updated and Ready: done, got %+v", r)
	}
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2,
		CurrentRevision: "kas-a", UpdateRevision: "kas-b"}
	if r := rolloutOf(t, s); r.InProgress {
		t.Errorf("the ordinal below the partition keeps the old revision by design: done, got %+v", r)
	}
	// Under the partition, scaled from 4 to 2 with ordinals 2 and 3 (condemned) updated and
	// ordinal 1 not yet: 2 updated reach the target of 1 only by counting the condemned.
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 2, ReadyReplicas: 4,
		CurrentRevision: "kas-a", UpdateRevision: "kas-b"}
	if r := rolloutOf(t, s); !r.InProgress {
		t.Errorf("ordinal 1, at the partition, still on the old revision while the condemned are counted: in progress, got %+v", r)
	}
	s.Status.UpdatedReplicas = 3
	if r := rolloutOf(t, s); r.InProgress {
		t.Errorf("ordinals 1 to 3 updated: done, got %+v", r)
	}
}
