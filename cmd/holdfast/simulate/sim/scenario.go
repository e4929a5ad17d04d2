package sim

import (
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/manifests"
	"github.com/holdfast-dev/holdfast/internal/validation"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Scenario is a scenario file: its Scenario document and the objects the cluster starts with.
type Scenario struct {
	Name string
	// Source is where the Scenario document was read.
	Source string
	Spec   scenariov1alpha1.ScenarioSpec
	// Objects are the cluster's objects at the start: Namespaces, Nodes, Deployments,
	// StatefulSets, DaemonSets, RolloutPolicies and DisruptionPolicies. A workload starts
	// rolled out, its pods Ready for an hour.
	Objects []Object
}

// Object is one object of a scenario, named by where it was read.
type Object struct {
	Source string
	Object client.Object
}

// scenarioKind is the Scenario document's group and kind, for errors.
var scenarioKind = schema.GroupKind{Group: scenariov1alpha1.GroupVersion.Group, Kind: scenariov1alpha1.Kind}

// Load reads a scenario from files and directories ("-" is stdin): exactly one Scenario
// document, decoded strictly and validated (validation.DecodeScenario), and the cluster's
// objects, policies read as the API server would store them. Every error names the file,
// the document and, where it can, the field.
func Load(paths []string, stdin io.Reader) (*Scenario, error) {
	decoder := serializer.NewCodecFactory(informer.NewScheme()).UniversalDeserializer()
	sc := &Scenario{}
	err := manifests.Each(paths, stdin, func(source string, raw []byte) error {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		if tm.Kind == scenariov1alpha1.Kind {
			if sc.Source != "" {
				return fmt.Errorf("%s: a second Scenario (the first is at %s)", source, sc.Source)
			}
			doc, errs := validation.DecodeScenario(raw)
			if len(errs) > 0 {
				var name struct {
					Metadata struct{ Name string } `json:"metadata"`
				}
				_ = yaml.Unmarshal(raw, &name)
				return fmt.Errorf("%s: %w", source, apierrors.NewInvalid(scenarioKind, name.Metadata.Name, errs))
			}
			sc.Source, sc.Name, sc.Spec = source, doc.Name, doc.Spec
			return nil
		}
		if gv, _ := schema.ParseGroupVersion(tm.APIVersion); gv.Group == v1alpha1.GroupVersion.Group {
			// A policy is what the API server, with holdfast's policy webhook, would store
			// of it, defaults included; what they would refuse never reaches the cluster.
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			p, errs := validation.Admit(u)
			if len(errs) > 0 {
				return fmt.Errorf("%s: %w", source, apierrors.NewInvalid(u.GroupVersionKind().GroupKind(), u.GetName(), errs))
			}
			sc.Objects = append(sc.Objects, Object{Source: source, Object: p})
			return nil
		}
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		co, ok := obj.(client.Object)
		if !ok || !simulated(obj) {
			return fmt.Errorf("%s: a %s: a scenario holds Namespaces, Nodes, Deployments, StatefulSets, DaemonSets, RolloutPolicies and DisruptionPolicies", source, tm.Kind)
		}
		sc.Objects = append(sc.Objects, Object{Source: source, Object: co})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sc.Source == "" {
		return nil, fmt.Errorf("%s: no Scenario document (apiVersion: %s, kind: %s)", strings.Join(paths, ", "), scenariov1alpha1.GroupVersion, scenariov1alpha1.Kind)
	}
	return sc, nil
}

// simulated is an object a scenario's cluster holds.
func simulated(obj runtime.Object) bool {
	if _, ok := workload.MetaOf(obj); ok {
		return true
	}
	switch obj.(type) {
	case *corev1.Namespace, *corev1.Node, *v1alpha1.RolloutPolicy, *v1alpha1.DisruptionPolicy:
		return true
	}
	return false
}

// refOf is the workload a scenario names.
func refOf(r scenariov1alpha1.WorkloadRef) workload.Ref {
	return workload.Ref{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
