package pdb

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Plan computes the workload's desired PDB from the cache, and the conflict that rules
// one out, if any.
func Plan(ctx context.Context, c client.Reader, m *policy.Matcher, w workload.Meta) (*policyv1.PodDisruptionBudget, *Coverage, error) {
	nsLabels, policies, err := readPolicies(ctx, c, w.Namespace)
	if err != nil {
		return nil, nil, err
	}
	desired := Desired(w, generating(m, policies, w, nsLabels))
	if desired == nil {
		return nil, nil, nil
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &pdbs, client.InNamespace(w.Namespace)); err != nil {
		return nil, nil, err
	}
	ns := Namespace{PDBs: pdbs.Items}
	if ns.Workloads, err = workloadsIn(ctx, c, w.Namespace); err != nil {
		return nil, nil, err
	}
	if ns.Pods, err = podLabels(ctx, c, w); err != nil {
		return nil, nil, err
	}
	if conflict := Conflict(m, w, desired, ns); conflict != nil {
		return nil, conflict, nil
	}
	return desired, nil, nil
}

// readPolicies reads the labels of the namespace and the DisruptionPolicies, what decides
// which policies generate a floor there.
func readPolicies(ctx context.Context, c client.Reader, namespace string) (map[string]string, []v1alpha1.DisruptionPolicy, error) {
	nsLabels, err := policy.NamespaceLabels(ctx, c, namespace)
	if err != nil {
		return nil, nil, err
	}
	var policies v1alpha1.DisruptionPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return nil, nil, err
	}
	return nsLabels, policies.Items, nil
}

// generating are the policies that generate a PDB for the workload (Generating).
func generating(m *policy.Matcher, policies []v1alpha1.DisruptionPolicy, w workload.Meta, nsLabels map[string]string) []*v1alpha1.DisruptionPolicy {
	var out []*v1alpha1.DisruptionPolicy
	for i := range policies {
		if Generating(m, &policies[i], w, nsLabels) {
			out = append(out, &policies[i])
		}
	}
	return out
}

// workloadsIn lists the namespace's workloads of every kind.
func workloadsIn(ctx context.Context, c client.Reader, namespace string) ([]workload.Meta, error) {
	var out []workload.Meta
	for _, k := range workload.Kinds() {
		list, _ := workload.NewList(k)
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		objs, _ := meta.ExtractList(list)
		for _, o := range objs {
			if ow, ok := workload.MetaOf(o); ok {
				out = append(out, ow)
			}
		}
	}
	return out, nil
}

// podLabels are the labels of the pods the workload's selector matches; none for a
// selector that does not parse.
func podLabels(ctx context.Context, c client.Reader, w workload.Meta) ([]map[string]string, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return nil, nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(w.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(pods.Items))
	for i := range pods.Items {
		out = append(out, pods.Items[i].Labels)
	}
	return out, nil
}

// Weakening is a PDB that would weaken one generating policy's floor under one workload.
type Weakening struct {
	Policy   *v1alpha1.DisruptionPolicy
	Workload workload.Meta
	*Coverage
}

// Floors is what one namespace's generated floors are judged by, read once from the
// cache so that it judges several PDBs (an UPDATE's new and stored one) alike: the
// namespace's workloads, and for each one a policy generates a PDB for, those policies and
// the labels of its live pods.
type Floors struct {
	// Workloads are the namespace's workloads of every kind.
	Workloads []workload.Meta
	floors    []floor
}

// floor is one workload with a generated floor.
type floor struct {
	w          workload.Meta
	generating []*v1alpha1.DisruptionPolicy
	pods       []map[string]string
}

// ReadFloors reads from c (the cache) the namespace's labels, the policies, its workloads
// and the pods of those a policy generates a PDB for.
func ReadFloors(ctx context.Context, c client.Reader, m *policy.Matcher, namespace string) (*Floors, error) {
	nsLabels, policies, err := readPolicies(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	f := &Floors{}
	if f.Workloads, err = workloadsIn(ctx, c, namespace); err != nil {
		return nil, err
	}
	for _, w := range f.Workloads {
		gen := generating(m, policies, w, nsLabels)
		if len(gen) == 0 {
			continue
		}
		pods, err := podLabels(ctx, c, w)
		if err != nil {
			return nil, err
		}
		f.floors = append(f.floors, floor{w: w, generating: gen, pods: pods})
	}
	return f, nil
}

// Weakenings are the floors a PodDisruptionBudget of the namespace would weaken: for each
// workload a policy generates a PDB for and whose pods it covers, each such policy whose
// budget it is weaker than (Conflict, judged against that policy's own desired PDB).
// holdfast's own generated PDB weakens nothing.
func (f *Floors) Weakenings(m *policy.Matcher, candidate *policyv1.PodDisruptionBudget) []Weakening {
	if candidate.Spec.Selector == nil {
		return nil // covers no pod
	}
	ns := Namespace{PDBs: []policyv1.PodDisruptionBudget{*candidate}, Workloads: f.Workloads}
	var out []Weakening
	for _, fl := range f.floors {
		w, generating := fl.w, fl.generating
		ns.Pods = fl.pods
		if Generated(candidate) && candidate.Name == Name(w.Ref) {
			// Holdfast's own floor: what the generator writes is Desired; anything else is
			// someone's edit of the floor (the generator reverts it, but a label dropped at
			// once would make it someone else's PDB and keep the edit).
			if desired := Desired(w, generating); desired != nil && !equality.Semantic.DeepEqual(candidate.Spec, desired.Spec) {
				out = append(out, Weakening{Policy: generating[0], Workload: w, Coverage: &Coverage{By: candidate, Weakens: true,
					Allows: Allowed(&candidate.Spec, w.Expected), Weakness: "is holdfast's generated floor, whose spec only holdfast writes (it reverts any other)"}})
			}
			continue
		}
		for _, p := range generating {
			desired := Desired(w, []*v1alpha1.DisruptionPolicy{p})
			if desired == nil {
				continue // below the policy's minReplicas: no floor to weaken
			}
			if c := Conflict(m, w, desired, ns); c != nil && c.By != nil && c.Weakens {
				out = append(out, Weakening{Policy: p, Workload: w, Coverage: c})
			}
		}
	}
	return out
}
