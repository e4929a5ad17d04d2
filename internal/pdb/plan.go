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
	nsLabels, err := policy.NamespaceLabels(ctx, c, w.Namespace)
	if err != nil {
		return nil, nil, err
	}
	var policies v1alpha1.DisruptionPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return nil, nil, err
	}
	var generating []*v1alpha1.DisruptionPolicy
	for i := range policies.Items {
		if Generating(m, &policies.Items[i], w, nsLabels) {
			generating = append(generating, &policies.Items[i])
		}
	}
	desired := Desired(w, generating)
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

// Weakenings are the floors a PodDisruptionBudget would weaken: for each workload of its
// namespace that a policy generates a PDB for and whose pods it covers, each such policy
// whose budget it is weaker than (Conflict, judged against that policy's own desired PDB).
// holdfast's own generated PDB weakens nothing. Read from c (the cache): the namespace's
// labels, the policies, its workloads and their pods.
func Weakenings(ctx context.Context, c client.Reader, m *policy.Matcher, candidate *policyv1.PodDisruptionBudget) ([]Weakening, error) {
	if candidate.Spec.Selector == nil {
		return nil, nil // covers no pod
	}
	nsLabels, err := policy.NamespaceLabels(ctx, c, candidate.Namespace)
	if err != nil {
		return nil, err
	}
	var policies v1alpha1.DisruptionPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return nil, err
	}
	ns := Namespace{PDBs: []policyv1.PodDisruptionBudget{*candidate}}
	if ns.Workloads, err = workloadsIn(ctx, c, candidate.Namespace); err != nil {
		return nil, err
	}
	var out []Weakening
	for _, w := range ns.Workloads {
		var generating []*v1alpha1.DisruptionPolicy
		for i := range policies.Items {
			if Generating(m, &policies.Items[i], w, nsLabels) {
				generating = append(generating, &policies.Items[i])
			}
		}
		if len(generating) == 0 {
			continue
		}
		if ns.Pods, err = podLabels(ctx, c, w); err != nil {
			return nil, err
		}
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
	return out, nil
}
