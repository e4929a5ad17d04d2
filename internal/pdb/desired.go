// Package pdb is the PDB generator: it keeps one PodDisruptionBudget under every workload
// whose pods a DisruptionPolicy with pdb.generate selects, the floor that still holds
// when holdfast's eviction webhook is down.
package pdb

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// Labels on every generated PDB.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "holdfast"
	PolicyLabel    = "holdfast.dev/policy"
)

// Workload is what the generator reads of a Deployment, StatefulSet or DaemonSet.
type Workload struct {
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
	Selector  *metav1.LabelSelector
	// PodLabels are the pod template's labels, which policies select.
	PodLabels map[string]string
	// Expected is spec.replicas, or a DaemonSet's desiredNumberScheduled.
	Expected int32
}

// FromObject reads a workload; ok is false for other kinds.
func FromObject(obj any) (w Workload, ok bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return Workload{"Deployment", o.Namespace, o.Name, o.UID, o.Spec.Selector, o.Spec.Template.Labels, ptr.Deref(o.Spec.Replicas, 1)}, true
	case *appsv1.StatefulSet:
		return Workload{"StatefulSet", o.Namespace, o.Name, o.UID, o.Spec.Selector, o.Spec.Template.Labels, ptr.Deref(o.Spec.Replicas, 1)}, true
	case *appsv1.DaemonSet:
		return Workload{"DaemonSet", o.Namespace, o.Name, o.UID, o.Spec.Selector, o.Spec.Template.Labels, o.Status.DesiredNumberScheduled}, true
	}
	return Workload{}, false
}

// Name is the generated PDB's name for a workload: kind and name, so that a Deployment
// and a StatefulSet of one name get one each.
func Name(w Workload) string {
	n := "holdfast-" + strings.ToLower(w.Kind) + "-" + w.Name
	if len(n) > 253 {
		n = n[:253]
	}
	return n
}

// Generating reports whether a policy generates PDBs for the workload in a namespace
// with these labels. An invalid selector generates nothing.
func Generating(p *v1alpha1.DisruptionPolicy, w Workload, nsLabels map[string]string) bool {
	if p.Spec.PDB == nil || !p.Spec.PDB.Generate || p.Spec.Suspend || p.DeletionTimestamp != nil {
		return false
	}
	ok, err := policy.Matches(p.Spec.Targets.NamespaceSelector, nsLabels)
	if err != nil || !ok {
		return false
	}
	ok, err = policy.Matches(p.Spec.Targets.Selector, w.PodLabels)
	return err == nil && ok
}

// Desired is the PDB holdfast should keep for the workload under the generating
// policies, or nil for none. Several policies: the smallest maxUnavailable wins.
func Desired(w Workload, policies []*v1alpha1.DisruptionPolicy) *policyv1.PodDisruptionBudget {
	if len(policies) == 0 || w.Selector == nil {
		return nil
	}
	p := slices.MinFunc(policies, func(a, b *v1alpha1.DisruptionPolicy) int {
		if d := policy.Budget(a.Spec.MaxUnavailable, w.Expected) - policy.Budget(b.Spec.MaxUnavailable, w.Expected); d != 0 {
			return int(d)
		}
		return strings.Compare(a.Name, b.Name)
	})
	if w.Expected < ptr.Deref(p.Spec.PDB.MinReplicas, 2) {
		return nil
	}
	unhealthy := policyv1.AlwaysAllow
	if p.Spec.UnhealthyPodEvictionPolicy != nil {
		unhealthy = *p.Spec.UnhealthyPodEvictionPolicy
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: w.Selector.DeepCopy(), UnhealthyPodEvictionPolicy: &unhealthy}
	budget := policy.Budget(p.Spec.MaxUnavailable, w.Expected)
	if w.Kind == "DaemonSet" {
		// PDBs can only count a DaemonSet's pods with an integer minAvailable.
		spec.MinAvailable = ptr.To(intstr.FromInt32(max(0, w.Expected-budget)))
	} else {
		mu := intstr.FromInt32(1)
		if p.Spec.MaxUnavailable != nil {
			mu = *p.Spec.MaxUnavailable
		}
		spec.MaxUnavailable = &mu
	}
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: w.Kind}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.Namespace, Name: Name(w),
			Labels: map[string]string{ManagedByLabel: ManagedBy, PolicyLabel: p.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
				Name: w.Name, UID: w.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: spec,
	}
}

// Managed reports a PDB holdfast generated.
func Managed(p *policyv1.PodDisruptionBudget) bool { return p.Labels[ManagedByLabel] == ManagedBy }

// Conflict explains why the workload must not get a generated PDB, or is "": another
// PDB, not holdfast's, already covers its pods (kube's eviction API answers 500 when two
// PDBs cover a pod), or its selector would also cover another workload's pods.
func Conflict(w Workload, pdbs []policyv1.PodDisruptionBudget, others []Workload) string {
	for i := range pdbs {
		p := &pdbs[i]
		if Managed(p) || p.Namespace != w.Namespace {
			continue
		}
		if ok, err := policy.Matches(p.Spec.Selector, w.PodLabels); err == nil && ok && p.Spec.Selector != nil {
			return fmt.Sprintf("PodDisruptionBudget %s/%s already covers the pods of %s %s", p.Namespace, p.Name, w.Kind, w.Name)
		}
	}
	for _, o := range others {
		if o.UID == w.UID || o.Namespace != w.Namespace {
			continue
		}
		if ok, err := policy.Matches(w.Selector, o.PodLabels); err == nil && ok {
			return fmt.Sprintf("the selector of %s %s also selects the pods of %s %s", w.Kind, w.Name, o.Kind, o.Name)
		}
	}
	return ""
}
