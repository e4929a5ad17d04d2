// Package defaults gives the offline commands the object a validating admission webhook
// is sent for a Deployment, StatefulSet or DaemonSet: the apps/v1 and core/v1 defaults
// kube-apiserver 1.37 applies, with its default feature gates, to every object it decodes
// (stored objects included), and the status and generation its registry gives the object
// before admission.
//
// It is written from kube's sources, each function citing the one it follows:
// pkg/apis/apps/v1/defaults.go, pkg/apis/core/v1/defaults.go and the generated
// zz_generated.defaults.go beside them, which say which defaults apply to which nested
// type, and pkg/registry/apps/*/strategy.go. It does not import k8s.io/kubernetes, which is
// not a library. test/integration holds it to the real API server over a corpus that sets
// off every default it applies.
package defaults

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Object applies the API server's defaults to a Deployment, StatefulSet or DaemonSet in
// place, as SetObjectDefaults_Deployment, _StatefulSet and _DaemonSet do
// (pkg/apis/apps/v1/zz_generated.defaults.go); false for any other object, left as it is.
func Object(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		Deployment(o)
	case *appsv1.StatefulSet:
		StatefulSet(o)
	case *appsv1.DaemonSet:
		DaemonSet(o)
	default:
		return false
	}
	return true
}

// Admitted returns what a validating admission webhook is sent for a write of obj: a
// CREATE when old is nil, else an UPDATE from old. Both are copies, defaulted (Object);
// obj's status and generation are the registry's (PrepareForCreate and PrepareForUpdate
// in pkg/registry/apps/{deployment,statefulset,daemonset}/strategy.go): on CREATE no
// status and generation 1; on UPDATE old's status, since a write of the object never
// writes its status, and old's generation, one more when the spec changed.
func Admitted[T interface {
	runtime.Object
	metav1.Object
}](old, obj T) (T, T) {
	obj = obj.DeepCopyObject().(T)
	Object(obj)
	if isNil(old) {
		clearStatus(obj)
		obj.SetGeneration(1)
		return old, obj
	}
	old = old.DeepCopyObject().(T)
	Object(old)
	// The API server keeps the stored object's identity (rest.BeforeUpdate): the UID,
	// which owns the workload's revisions, and the creation time.
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetGeneration(old.GetGeneration())
	switch o := any(obj).(type) {
	case *appsv1.Deployment:
		prev := any(old).(*appsv1.Deployment)
		o.Status = *prev.Status.DeepCopy()
		// Annotations too: the Deployment controller copies them to its ReplicaSets.
		if !equality.Semantic.DeepEqual(o.Spec, prev.Spec) || !equality.Semantic.DeepEqual(o.Annotations, prev.Annotations) {
			o.Generation++
		}
	case *appsv1.StatefulSet:
		prev := any(old).(*appsv1.StatefulSet)
		o.Status = *prev.Status.DeepCopy()
		if !equality.Semantic.DeepEqual(o.Spec, prev.Spec) {
			o.Generation++
		}
	case *appsv1.DaemonSet:
		prev := any(old).(*appsv1.DaemonSet)
		o.Status = *prev.Status.DeepCopy()
		if !equality.Semantic.DeepEqual(o.Spec, prev.Spec) {
			o.Generation++
		}
	}
	return old, obj
}

// isNil is a nil interface or a nil pointer in one.
func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// clearStatus is PrepareForCreate's: a create cannot set status.
func clearStatus(obj runtime.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Status = appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		o.Status = appsv1.StatefulSetStatus{}
	case *appsv1.DaemonSet:
		o.Status = appsv1.DaemonSetStatus{}
	}
}

// ReplicaSet is SetObjectDefaults_ReplicaSet: SetDefaults_ReplicaSet
// (pkg/apis/apps/v1/defaults.go), then the pod template's defaults. A Deployment's
// ReplicaSets carry its defaulted template; check defaults the ones it is given in files
// so that they compare with the workload's as the cluster's would.
func ReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr.To[int32](1)
	}
	podTemplate(&rs.Spec.Template)
}

// Deployment is SetObjectDefaults_Deployment: SetDefaults_Deployment
// (pkg/apis/apps/v1/defaults.go), then the pod template's defaults.
func Deployment(d *appsv1.Deployment) {
	s := &d.Spec
	if s.Replicas == nil {
		s.Replicas = ptr.To[int32](1)
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if s.Strategy.RollingUpdate.MaxUnavailable == nil {
			s.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if s.Strategy.RollingUpdate.MaxSurge == nil {
			s.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	podTemplate(&s.Template)
}

// StatefulSet is SetObjectDefaults_StatefulSet: SetDefaults_StatefulSet
// (pkg/apis/apps/v1/defaults.go), with MaxUnavailableStatefulSet on (beta, on by default
// since 1.37), then the pod template's and the volume claim templates' defaults.
func StatefulSet(st *appsv1.StatefulSet) {
	s := &st.Spec
	if s.PodManagementPolicy == "" {
		s.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	// Only a rollingUpdate the type's default created, or one written: a RollingUpdate
	// type written without one keeps none.
	if ru := s.UpdateStrategy.RollingUpdate; s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		if ru.Partition == nil {
			ru.Partition = ptr.To[int32](0)
		}
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
	}
	if s.PersistentVolumeClaimRetentionPolicy == nil {
		s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if s.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		s.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		s.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Replicas == nil {
		s.Replicas = ptr.To[int32](1)
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	podTemplate(&s.Template)
	for i := range s.VolumeClaimTemplates {
		c := &s.VolumeClaimTemplates[i]
		// Not a default: Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec
		// (pkg/apis/apps/v1/conversion.go) writes every claim template's kind.
		c.APIVersion, c.Kind = "v1", "PersistentVolumeClaim"
		// SetDefaults_PersistentVolumeClaim: a template's status says Pending.
		if c.Status.Phase == "" {
			c.Status.Phase = corev1.ClaimPending
		}
		claimSpec(&c.Spec)
		resourceList(c.Status.Capacity)
		resourceList(c.Status.AllocatedResources)
	}
}

// DaemonSet is SetObjectDefaults_DaemonSet: SetDefaults_DaemonSet
// (pkg/apis/apps/v1/defaults.go), then the pod template's defaults.
func DaemonSet(ds *appsv1.DaemonSet) {
	s := &ds.Spec
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			s.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
		if s.UpdateStrategy.RollingUpdate.MaxSurge == nil {
			s.UpdateStrategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = ptr.To[int32](10)
	}
	podTemplate(&s.Template)
}
