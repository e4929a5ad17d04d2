package workload

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/apijson"
)

// Lean is the part of an apps/v1 Deployment, StatefulSet or DaemonSet that decisions
// read, in one shape for the three kinds; the pod template stays JSON. A Workload is a
// view of a Lean (FromLean), whichever way the object was read: decoded from a review
// (DecodeObject, Decode) or taken from a typed object (From). It is a runtime.Object only
// to travel in a request's RawExtension.
type Lean struct {
	Metadata struct {
		Name       string            `json:"name"`
		Namespace  string            `json:"namespace"`
		UID        types.UID         `json:"uid"`
		Generation int64             `json:"generation"`
		Labels     map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Replicas        optInt32 `json:"replicas"`
		Paused          bool     `json:"paused"`
		MinReadySeconds int32    `json:"minReadySeconds"`
		// ProgressDeadlineSeconds is a Deployment's: how long kube waits for progress
		// before it declares the rollout stalled (Conditions).
		ProgressDeadlineSeconds optInt32 `json:"progressDeadlineSeconds"`
		// Strategy is a Deployment's; UpdateStrategy a StatefulSet's or DaemonSet's.
		Strategy       strategy     `json:"strategy"`
		UpdateStrategy strategy     `json:"updateStrategy"`
		Template       templateJSON `json:"template"`
		// Selector is spec.selector, kept as JSON (Workload.Selector decodes it): only what
		// a CREATE adopts reads it.
		Selector rawJSON `json:"selector"`
		// Ordinals is a StatefulSet's: the first ordinal its pods are numbered from.
		Ordinals struct {
			Start int32 `json:"start"`
		} `json:"ordinals"`
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
		CurrentReplicas int32  `json:"currentReplicas"`
		// DaemonSets
		DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`
		CurrentNumberScheduled int32 `json:"currentNumberScheduled"`
		UpdatedNumberScheduled int32 `json:"updatedNumberScheduled"`
		NumberAvailable        int32 `json:"numberAvailable"`
		// Deployments: of their conditions, whether kube has declared the rollout stalled.
		Conditions deadlineExceeded `json:"conditions"`
	} `json:"status"`

	// workload is the Lean's view as a Workload (view).
	workload Workload
	// selector is a typed workload's spec.selector (leanOf).
	selector *metav1.LabelSelector
}

type strategy struct {
	Type          string `json:"type"`
	RollingUpdate struct {
		MaxUnavailable optIntOrString `json:"maxUnavailable"`
		MaxSurge       optIntOrString `json:"maxSurge"` // Deployments and DaemonSets
		Partition      optInt32       `json:"partition"`
	} `json:"rollingUpdate"`
}

// GetObjectKind implements runtime.Object; a Lean has no kind of its own.
func (l *Lean) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (l *Lean) DeepCopyObject() runtime.Object {
	c := *l
	c.Metadata.Labels = maps.Clone(l.Metadata.Labels)
	c.Spec.Template.commands = slices.Clone(l.Spec.Template.commands)
	c.workload = Workload{}
	return &c
}

// DecodeObject reads a Lean from a review's JSON stream (a review.ObjectDecoder).
func DecodeObject(dec *jsontext.Decoder) (runtime.Object, error) {
	l := &Lean{}
	if err := apijson.UnmarshalDecode(dec, l); err != nil {
		return nil, err
	}
	return l, nil
}

// Decode reads an apps/v1 workload of the given kind from the JSON the API server sent,
// decoding only what decisions read, with encoding/json/v2's implementation; the pod
// template is kept as JSON (see Template). It decides the same as From over the typed
// object; the differential tests hold it to that.
func Decode(kind v1alpha1.WorkloadKind, raw []byte) (*Workload, error) {
	l := &Lean{}
	if err := apijson.Unmarshal(raw, l); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	return FromLean(kind, l)
}

// FromLean views a Lean decoded from a workload of the given kind as a Workload, which
// shares its memory.
func FromLean(kind v1alpha1.WorkloadKind, l *Lean) (*Workload, error) {
	if t := l.Spec.Template.raw; len(t) == 0 || string(t) == "null" {
		return nil, fmt.Errorf("decoding %s: spec.template is missing", kind)
	}
	return view(kind, l, &l.Spec.Template.Template)
}

// view is the Workload a Lean of the given kind describes, with its template; it lives
// in the Lean.
func view(kind v1alpha1.WorkloadKind, l *Lean, t *Template) (*Workload, error) {
	w := &l.workload
	*w = Workload{Ref: Ref{Kind: kind, Namespace: l.Metadata.Namespace, Name: l.Metadata.Name, UID: l.Metadata.UID},
		Labels: l.Metadata.Labels, Generation: l.Metadata.Generation, Template: t, selector: l.selector, selectorJSON: l.Spec.Selector}
	switch kind {
	case v1alpha1.KindDeployment:
		w.Replicas = l.Spec.Replicas.ptr()
		w.Rollout, w.Strategy = deploymentRollout(l), deploymentStrategy(l)
	case v1alpha1.KindStatefulSet:
		w.Replicas, w.OrdinalStart = l.Spec.Replicas.ptr(), l.Spec.Ordinals.Start
		w.Rollout, w.Strategy = statefulSetRollout(l), statefulSetStrategy(l)
	case v1alpha1.KindDaemonSet:
		w.Rollout, w.Strategy = daemonSetRollout(l), daemonSetStrategy(l)
	default:
		return nil, unsupported(kind)
	}
	w.Expected = expected(kind, w.Replicas, l.Status.DesiredNumberScheduled)
	return w, nil
}

// leanOf is what decisions read of a typed workload, in a Lean, and its pod template.
func leanOf(obj runtime.Object) (v1alpha1.WorkloadKind, *Lean, *corev1.PodTemplateSpec, error) {
	l := &Lean{}
	if f, ok := fieldsOf(obj); ok {
		l.selector = f.selector
	}
	if m, ok := obj.(metav1.Object); ok {
		l.Metadata.Name, l.Metadata.Namespace, l.Metadata.UID = m.GetName(), m.GetNamespace(), m.GetUID()
		l.Metadata.Generation, l.Metadata.Labels = m.GetGeneration(), m.GetLabels()
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		l.Spec.Replicas.set(o.Spec.Replicas)
		l.Spec.Paused, l.Spec.MinReadySeconds = o.Spec.Paused, o.Spec.MinReadySeconds
		l.Spec.ProgressDeadlineSeconds.set(o.Spec.ProgressDeadlineSeconds)
		l.Spec.Strategy.Type = string(o.Spec.Strategy.Type)
		if ru := o.Spec.Strategy.RollingUpdate; ru != nil {
			l.Spec.Strategy.RollingUpdate.MaxUnavailable.set(ru.MaxUnavailable)
			l.Spec.Strategy.RollingUpdate.MaxSurge.set(ru.MaxSurge)
		}
		st := &o.Status
		l.Status.ObservedGeneration, l.Status.Replicas, l.Status.UpdatedReplicas = st.ObservedGeneration, st.Replicas, st.UpdatedReplicas
		l.Status.ReadyReplicas, l.Status.AvailableReplicas = st.ReadyReplicas, st.AvailableReplicas
		for _, c := range st.Conditions {
			l.Status.Conditions.see(string(c.Type), string(c.Status), c.Reason)
		}
		return v1alpha1.KindDeployment, l, &o.Spec.Template, nil
	case *appsv1.StatefulSet:
		l.Spec.Replicas.set(o.Spec.Replicas)
		l.Spec.MinReadySeconds = o.Spec.MinReadySeconds
		l.Spec.UpdateStrategy.Type = string(o.Spec.UpdateStrategy.Type)
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			l.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.set(ru.MaxUnavailable)
			l.Spec.UpdateStrategy.RollingUpdate.Partition.set(ru.Partition)
		}
		if o.Spec.Ordinals != nil {
			l.Spec.Ordinals.Start = o.Spec.Ordinals.Start
		}
		st := &o.Status
		l.Status.ObservedGeneration, l.Status.Replicas, l.Status.UpdatedReplicas = st.ObservedGeneration, st.Replicas, st.UpdatedReplicas
		l.Status.ReadyReplicas, l.Status.AvailableReplicas = st.ReadyReplicas, st.AvailableReplicas
		l.Status.CurrentRevision, l.Status.UpdateRevision, l.Status.CurrentReplicas = st.CurrentRevision, st.UpdateRevision, st.CurrentReplicas
		return v1alpha1.KindStatefulSet, l, &o.Spec.Template, nil
	case *appsv1.DaemonSet:
		l.Spec.MinReadySeconds = o.Spec.MinReadySeconds
		l.Spec.UpdateStrategy.Type = string(o.Spec.UpdateStrategy.Type)
		if ru := o.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			l.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.set(ru.MaxUnavailable)
			l.Spec.UpdateStrategy.RollingUpdate.MaxSurge.set(ru.MaxSurge)
		}
		st := &o.Status
		l.Status.ObservedGeneration, l.Status.DesiredNumberScheduled = st.ObservedGeneration, st.DesiredNumberScheduled
		l.Status.UpdatedNumberScheduled, l.Status.NumberAvailable = st.UpdatedNumberScheduled, st.NumberAvailable
		l.Status.CurrentNumberScheduled = st.CurrentNumberScheduled
		return v1alpha1.KindDaemonSet, l, &o.Spec.Template, nil
	default:
		return "", nil, nil, fmt.Errorf("unsupported workload type %T: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", obj)
	}
}

// optInt32 is an optional int32, read without allocating.
type optInt32 struct {
	v     int32
	isSet bool
}

func (o *optInt32) set(p *int32) {
	if p != nil {
		o.v, o.isSet = *p, true
	}
}

// or is the value, or def when unset.
func (o *optInt32) or(def int32) int32 {
	if !o.isSet {
		return def
	}
	return o.v
}

// ptr is the value, or nil when unset.
func (o *optInt32) ptr() *int32 {
	if !o.isSet {
		return nil
	}
	return &o.v
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom (encoding/json/v2).
func (o *optInt32) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		*o = optInt32{}
		return err
	}
	o.isSet = true
	return apijson.UnmarshalDecode(dec, &o.v)
}

// optIntOrString is an optional int or string (maxUnavailable, maxSurge), read as
// intstr.IntOrString reads itself, without allocating for ints.
type optIntOrString struct {
	v     intstr.IntOrString
	isSet bool
}

func (o *optIntOrString) set(p *intstr.IntOrString) {
	if p != nil {
		o.v, o.isSet = *p, true
	}
}

func (o *optIntOrString) ptr() *intstr.IntOrString {
	if !o.isSet {
		return nil
	}
	return &o.v
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom (encoding/json/v2).
func (o *optIntOrString) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*o = optIntOrString{}
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		o.v.Type, o.isSet = intstr.String, true
		return apijson.UnmarshalDecode(dec, &o.v.StrVal)
	default:
		o.v.Type, o.isSet = intstr.Int, true
		return apijson.UnmarshalDecode(dec, &o.v.IntVal)
	}
}

// deadlineExceeded reads a Deployment's status.conditions for the one decisions read:
// Progressing False for ProgressDeadlineExceeded, kube's verdict on a stalled rollout.
type deadlineExceeded bool

func (d *deadlineExceeded) see(typ, status, reason string) {
	if typ == string(appsv1.DeploymentProgressing) && status == string(corev1.ConditionFalse) && reason == "ProgressDeadlineExceeded" {
		*d = true
	}
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom (encoding/json/v2).
func (d *deadlineExceeded) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	*d = false
	return elements(dec, func() error {
		var typ, status, reason []byte
		err := members(dec, func(name []byte) error {
			var err error
			switch string(name) {
			case "type":
				typ, err = stringValue(dec)
			case "status":
				status, err = stringValue(dec)
			case "reason":
				reason, err = stringValue(dec)
			default:
				err = dec.SkipValue()
			}
			return err
		})
		d.see(string(typ), string(status), string(reason))
		return err
	})
}

// templateJSON reads spec.template in the workload's single pass over the request: its
// JSON, as a slice of the input, and its containers' names and command lines, still
// JSON. It must be decoded from a complete []byte (json.Unmarshal, or a review's body).
type templateJSON struct {
	Template
	// inline holds the command lines of up to four containers, so that reading them
	// allocates nothing.
	inline [4]commandJSON
}

type commandJSON struct {
	name          []byte
	command, args rawJSON
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom (encoding/json/v2).
func (t *templateJSON) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	before := dec.UnreadBuffer()
	t.Template = Template{commands: t.inline[:0]}
	err := members(dec, func(name []byte) error {
		if string(name) != "spec" {
			return dec.SkipValue()
		}
		return members(dec, func(name []byte) error {
			if string(name) != "containers" {
				return dec.SkipValue()
			}
			return elements(dec, func() error {
				var c commandJSON
				err := members(dec, func(name []byte) error {
					var err error
					switch string(name) {
					case "name":
						c.name, err = stringValue(dec)
					case "command":
						err = c.command.UnmarshalJSONFrom(dec)
					case "args":
						err = c.args.UnmarshalJSONFrom(dec)
					default:
						err = dec.SkipValue()
					}
					return err
				})
				t.commands = append(t.commands, c)
				return err
			})
		})
	})
	t.raw = consumed(before, dec)
	return err
}
