package workload

import (
	"fmt"
	"maps"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/review"
)

// Lean is the part of an apps/v1 Deployment, StatefulSet or DaemonSet that decisions
// read, in one shape for the three kinds; the pod template stays JSON. It is a
// runtime.Object only to travel in a request's RawExtension (see DecodeObject).
type Lean struct {
	Metadata struct {
		Name       string            `json:"name"`
		Namespace  string            `json:"namespace"`
		UID        types.UID         `json:"uid"`
		Generation int64             `json:"generation"`
		Labels     map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Replicas        *int32 `json:"replicas"`
		Paused          bool   `json:"paused"`
		MinReadySeconds int32  `json:"minReadySeconds"`
		// Deployments
		Strategy struct {
			Type          appsv1.DeploymentStrategyType `json:"type"`
			RollingUpdate *rollingUpdate                `json:"rollingUpdate"`
		} `json:"strategy"`
		// StatefulSets and DaemonSets
		UpdateStrategy struct {
			Type          string         `json:"type"`
			RollingUpdate *rollingUpdate `json:"rollingUpdate"`
		} `json:"updateStrategy"`
		Template templateJSON `json:"template"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Replicas           int32 `json:"replicas"`
		UpdatedReplicas    int32 `json:"updatedReplicas"`
		ReadyReplicas      int32 `json:"readyReplicas"`
		AvailableReplicas  int32 `json:"availableReplicas"`
		// StatefulSets
		CurrentRevision string `json:"currentRevision"`
		UpdateRevision  string `json:"updateRevision"`
		// DaemonSets
		DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`
		UpdatedNumberScheduled int32 `json:"updatedNumberScheduled"`
		NumberAvailable        int32 `json:"numberAvailable"`
		// Deployments
		Conditions []struct {
			Type   appsv1.DeploymentConditionType `json:"type"`
			Status corev1.ConditionStatus         `json:"status"`
			Reason string                         `json:"reason"`
		} `json:"conditions"`
	} `json:"status"`
}

type rollingUpdate struct {
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable"`
	MaxSurge       *intstr.IntOrString `json:"maxSurge"`
	Partition      *int32              `json:"partition"`
}

// GetObjectKind implements runtime.Object; a Lean has no kind of its own.
func (l *Lean) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (l *Lean) DeepCopyObject() runtime.Object {
	c := *l
	c.Metadata.Labels = maps.Clone(l.Metadata.Labels)
	c.Spec.Template.commands = slices.Clone(l.Spec.Template.commands)
	c.Status.Conditions = slices.Clone(l.Status.Conditions)
	return &c
}

// DecodeObject reads a Lean from a review's JSON stream (a review.ObjectDecoder).
func DecodeObject(dec *jsontext.Decoder) (runtime.Object, error) {
	l := &Lean{}
	if err := jsonv2.UnmarshalDecode(dec, l, review.Options); err != nil {
		return nil, err
	}
	return l, nil
}

// Decode reads an apps/v1 workload of the given kind from the JSON the API server sent,
// decoding only what decisions read, with encoding/json/v2's implementation; the pod
// template is kept as JSON (see Template). It decides the same as From over the typed
// object; the differential tests hold it to that.
func Decode(kind string, raw []byte) (*Workload, error) {
	var l Lean
	if err := review.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	return FromLean(kind, &l)
}

// FromLean views a Lean decoded from a workload of the given kind as a Workload.
func FromLean(kind string, l *Lean) (*Workload, error) {
	if len(l.Spec.Template.raw) == 0 || string(l.Spec.Template.raw) == "null" {
		return nil, fmt.Errorf("decoding %s: spec.template is missing", kind)
	}
	meta := metav1.ObjectMeta{Name: l.Metadata.Name, Namespace: l.Metadata.Namespace, UID: l.Metadata.UID,
		Generation: l.Metadata.Generation, Labels: l.Metadata.Labels}
	st := &l.Status
	var obj runtime.Object
	switch v1alpha1.WorkloadKind(kind) {
	case v1alpha1.KindDeployment:
		d := &appsv1.Deployment{ObjectMeta: meta}
		d.Spec.Replicas, d.Spec.Paused, d.Spec.MinReadySeconds = l.Spec.Replicas, l.Spec.Paused, l.Spec.MinReadySeconds
		d.Spec.Strategy.Type = l.Spec.Strategy.Type
		if ru := l.Spec.Strategy.RollingUpdate; ru != nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ru.MaxUnavailable, MaxSurge: ru.MaxSurge}
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: st.ObservedGeneration, Replicas: st.Replicas,
			UpdatedReplicas: st.UpdatedReplicas, ReadyReplicas: st.ReadyReplicas, AvailableReplicas: st.AvailableReplicas}
		for _, c := range st.Conditions {
			d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		}
		obj = d
	case v1alpha1.KindStatefulSet:
		s := &appsv1.StatefulSet{ObjectMeta: meta}
		s.Spec.Replicas, s.Spec.MinReadySeconds = l.Spec.Replicas, l.Spec.MinReadySeconds
		s.Spec.UpdateStrategy.Type = appsv1.StatefulSetUpdateStrategyType(l.Spec.UpdateStrategy.Type)
		if ru := l.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ru.MaxUnavailable, Partition: ru.Partition}
		}
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: st.ObservedGeneration, Replicas: st.Replicas,
			UpdatedReplicas: st.UpdatedReplicas, ReadyReplicas: st.ReadyReplicas, AvailableReplicas: st.AvailableReplicas,
			CurrentRevision: st.CurrentRevision, UpdateRevision: st.UpdateRevision}
		obj = s
	case v1alpha1.KindDaemonSet:
		d := &appsv1.DaemonSet{ObjectMeta: meta}
		d.Spec.MinReadySeconds = l.Spec.MinReadySeconds
		d.Spec.UpdateStrategy.Type = appsv1.DaemonSetUpdateStrategyType(l.Spec.UpdateStrategy.Type)
		if ru := l.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ru.MaxUnavailable, MaxSurge: ru.MaxSurge}
		}
		d.Status = appsv1.DaemonSetStatus{ObservedGeneration: st.ObservedGeneration, DesiredNumberScheduled: st.DesiredNumberScheduled,
			UpdatedNumberScheduled: st.UpdatedNumberScheduled, NumberAvailable: st.NumberAvailable}
		obj = d
	default:
		return nil, fmt.Errorf("unsupported kind %q: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", kind)
	}
	w, err := From(obj)
	if err != nil {
		return nil, err
	}
	w.Template = &Template{raw: l.Spec.Template.raw, commands: l.Spec.Template.commands}
	return w, nil
}
