package pdb

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	if sel, err := metav1.LabelSelectorAsSelector(w.Selector); err == nil {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(w.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, nil, err
		}
		for i := range pods.Items {
			ns.Pods = append(ns.Pods, pods.Items[i].Labels)
		}
	}
	for _, k := range workload.Kinds() {
		list, _ := workload.NewList(k)
		if err := c.List(ctx, list, client.InNamespace(w.Namespace)); err != nil {
			return nil, nil, err
		}
		objs, _ := meta.ExtractList(list)
		for _, o := range objs {
			if ow, ok := workload.MetaOf(o); ok {
				ns.Workloads = append(ns.Workloads, ow)
			}
		}
	}
	if conflict := Conflict(m, w, desired, ns); conflict != nil {
		return nil, conflict, nil
	}
	return desired, nil, nil
}
