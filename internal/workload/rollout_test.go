package workload

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestDeploymentRollout(t *testing.T) {
	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
	d.Generation = 2
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}
	if r := deploymentRollout(d); r.InProgress {
		t.Errorf("complete rollout reported in progress: %+v", r)
	}
	d.Status.Replicas = 4 // an old pod still terminating its way out
	if r := deploymentRollout(d); !r.InProgress {
		t.Error("rollout with an old replica left must be in progress")
	}
	d.Status.Replicas, d.Generation = 3, 3
	if r := deploymentRollout(d); !r.InProgress {
		t.Error("unobserved generation must be in progress")
	}
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	if r := deploymentRollout(d); !r.DeadlineExceeded {
		t.Error("ProgressDeadlineExceeded not seen")
	}
}

func TestStatefulSetRolloutPartition(t *testing.T) {
	s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5),
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)}}}}
	s.Status = appsv1.StatefulSetStatus{CurrentRevision: "a", UpdateRevision: "b", UpdatedReplicas: 1}
	if r := statefulSetRollout(s); !r.InProgress {
		t.Error("1 of 2 pods above the partition updated: in progress")
	}
	s.Status.UpdatedReplicas = 2
	if r := statefulSetRollout(s); r.InProgress {
		t.Errorf("pods above the partition all updated: done, got %+v", r)
	}
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	if r := statefulSetRollout(s); !r.OnDelete {
		t.Error("OnDelete not seen")
	}
}

func TestDaemonSetRollout(t *testing.T) {
	d := &appsv1.DaemonSet{}
	d.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 6, UpdatedNumberScheduled: 6, NumberAvailable: 5}
	if r := daemonSetRollout(d); !r.InProgress {
		t.Error("one pod not yet available: in progress")
	}
	d.Status.NumberAvailable = 6
	if r := daemonSetRollout(d); r.InProgress {
		t.Error("all updated and available: done")
	}
}
