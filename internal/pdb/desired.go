// Package pdb is the PDB generator: it keeps one PodDisruptionBudget under every workload
// whose pods a DisruptionPolicy with pdb.generate selects, the floor that still holds
// when holdfast's eviction webhook is down.
package pdb

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Labels on every generated PDB.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "holdfast"
	PolicyLabel    = "holdfast.dev/policy"
)

// Name is the generated PDB's name for a workload: kind and name, so that a Deployment
// and a StatefulSet of one name get one each. A name longer than an object's name may be
// is cut, and kept unique by a hash of the whole (fit).
func Name(w workload.Ref) string {
	return fit("holdfast-"+strings.ToLower(string(w.Kind))+"-"+w.Name, validation.DNS1123SubdomainMaxLength)
}

// Owned selects the PDBs holdfast generated for a policy.
func Owned(policy string) client.MatchingLabels {
	return client.MatchingLabels{ManagedByLabel: ManagedBy, PolicyLabel: policyLabelValue(policy)}
}

// policyLabelValue is PolicyLabel's value for a policy: its name, cut (fit) where it is
// longer than a label value may be.
func policyLabelValue(policy string) string {
	return fit(policy, validation.LabelValueMaxLength)
}

// fit returns name when it is at most n long; otherwise its start, without a trailing
// '-' or '.' (neither may end a name or a label value), then '-' and ten hex digits of the
// SHA-256 of the whole name, so that two long names that share a start stay apart.
func fit(name string, n int) string {
	if len(name) <= n {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:5])
	return strings.TrimRight(name[:n-len(suffix)], "-.") + suffix
}

// Generating reports whether a policy generates PDBs for the workload in a namespace
// with these labels. An invalid selector generates nothing.
func Generating(m *policy.Matcher, p *v1alpha1.DisruptionPolicy, w workload.Meta, nsLabels map[string]string) bool {
	if p.Spec.PDB == nil || !p.Spec.PDB.Generate || p.Spec.Suspend || p.DeletionTimestamp != nil {
		return false
	}
	ok, err := m.SelectsPods(p.Spec.Targets, nsLabels, w.PodLabels)
	return err == nil && ok
}

// Desired is the PDB holdfast should keep for the workload under the generating
// policies, or nil for none. Each policy wants one once the workload has its minReplicas;
// of those, the smallest maxUnavailable wins (a stricter policy whose minReplicas the
// workload does not reach takes no floor away).
func Desired(w workload.Meta, policies []*v1alpha1.DisruptionPolicy) *policyv1.PodDisruptionBudget {
	if w.Selector == nil {
		return nil
	}
	wanting := slices.DeleteFunc(slices.Clone(policies), func(p *v1alpha1.DisruptionPolicy) bool {
		return w.Expected < ptr.Deref(p.Spec.PDB.MinReplicas, 2)
	})
	if len(wanting) == 0 {
		return nil
	}
	p := slices.MinFunc(wanting, func(a, b *v1alpha1.DisruptionPolicy) int {
		if d := budget(a, w) - budget(b, w); d != 0 {
			return int(d)
		}
		return strings.Compare(a.Name, b.Name)
	})
	unhealthy := policyv1.AlwaysAllow
	if p.Spec.UnhealthyPodEvictionPolicy != nil {
		unhealthy = *p.Spec.UnhealthyPodEvictionPolicy
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: w.Selector.DeepCopy(), UnhealthyPodEvictionPolicy: &unhealthy}
	if w.Kind == v1alpha1.KindDaemonSet {
		// PDBs can only count a DaemonSet's pods with an integer minAvailable.
		spec.MinAvailable = ptr.To(intstr.FromInt32(max(0, w.Expected-budget(p, w))))
	} else {
		mu := intstr.FromInt32(1)
		if p.Spec.MaxUnavailable != nil {
			mu = *p.Spec.MaxUnavailable
		}
		spec.MaxUnavailable = &mu
	}
	gvk := appsv1.SchemeGroupVersion.WithKind(string(w.Kind))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.Namespace, Name: Name(w.Ref),
			Labels: Owned(p.Name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
				Name: w.Name, UID: w.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: spec,
	}
}

func budget(p *v1alpha1.DisruptionPolicy, w workload.Meta) int32 {
	return policy.Resolve(policy.DisruptionBudget, w.Kind, p.Spec.MaxUnavailable, w.Expected)
}

// Managed reports a PDB holdfast generated.
func Managed(p *policyv1.PodDisruptionBudget) bool { return p.Labels[ManagedByLabel] == ManagedBy }

// Generated reports a PDB that is a workload's generated floor: holdfast's label, a
// controller reference to a workload, and the name Name gives that workload. A label alone
// is no proof: a tenant can write it on a PDB of its own.
func Generated(p *policyv1.PodDisruptionBudget) bool {
	ref := metav1.GetControllerOf(p)
	if !Managed(p) || ref == nil || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return false
	}
	return p.Name == Name(workload.Ref{Kind: v1alpha1.WorkloadKind(ref.Kind), Namespace: p.Namespace, Name: ref.Name, UID: ref.UID})
}

// Coverage is why a workload gets no generated PDB.
type Coverage struct {
	// Message says why, naming what covers the pods.
	Message string
	// By is the other PDB (not holdfast's) that covers the workload's pods; nil when the
	// workload's own selector would cover another workload's pods.
	By *policyv1.PodDisruptionBudget
	// Weakens is true when By allows more disruptions of the workload's pods than the
	// policy's budget: the floor while holdfast is down is then By, weaker than the policy.
	Weakens bool
	// Allows is how many of the workload's pods By lets go at once, and AlwaysAllow that By
	// lets its unhealthy pods go where the policy does not (set with By and a desired PDB).
	Allows      int32
	AlwaysAllow bool
	// Weakness says how By is weaker than the policy, when it Weakens.
	Weakness string
}

// Namespace is what Conflict reads of the workload's namespace.
type Namespace struct {
	PDBs []policyv1.PodDisruptionBudget
	// Workloads are the namespace's workloads; the workload itself may be among them.
	Workloads []workload.Meta
	// Pods are the labels of the workload's live pods. kube matches a PDB against pods, and
	// a pod carries labels its template does not (pod-template-hash,
	// controller-revision-hash, statefulset.kubernetes.io/pod-name, a tenant's own).
	Pods []map[string]string
}

// Conflict is why the workload must not get a generated PDB, or nil: another PDB, not
// holdfast's, already covers its pods (kube's eviction API answers 500 when two PDBs cover
// a pod; a PDB covers the pods its selector matches, `selector: {}` every pod of its
// namespace, no selector none), or its selector would also cover another workload's pods.
// desired is the PDB the policies want, against which another PDB's strictness is judged.
func Conflict(m *policy.Matcher, w workload.Meta, desired *policyv1.PodDisruptionBudget, ns Namespace) *Coverage {
	for i := range ns.PDBs {
		p := &ns.PDBs[i]
		// Only the workload's own generated PDB is no conflict: a label is no proof (a
		// tenant can write holdfast's managed-by label on a PDB of its own).
		if (Managed(p) && p.Name == Name(w.Ref)) || p.Namespace != w.Namespace || p.Spec.Selector == nil {
			continue
		}
		if !covers(m, p.Spec.Selector, w.PodLabels, ns.Pods) {
			continue
		}
		c := &Coverage{By: p, Message: fmt.Sprintf("PodDisruptionBudget %s/%s already covers the pods of %s %s", p.Namespace, p.Name, w.Kind, w.Name)}
		if desired != nil {
			theirs, ours := allowedOf(m, p, w, ns.Workloads), Allowed(&desired.Spec, w.Expected)
			c.Allows = theirs
			c.AlwaysAllow = unhealthyOf(&desired.Spec) == policyv1.IfHealthyBudget && unhealthyOf(&p.Spec) == policyv1.AlwaysAllow
			if n, of := partly(m, p.Spec.Selector, w.PodLabels, ns.Pods); n < of {
				// It covers some pods (one ordinal, a relabelled pod): holdfast's floor must
				// step back for all of them (two PDBs over one pod is a 500), and the rest have none.
				c.Allows = w.Expected
				c.Weakness = fmt.Sprintf("covers only %d of its %d pods, so the others have no floor", n, of)
			} else if theirs > ours {
				c.Weakness = fmt.Sprintf("allows %d of its %d pods down at once, more than the policy's %d", theirs, w.Expected, ours)
			} else if c.AlwaysAllow {
				c.Weakness = "lets its unhealthy pods be evicted whatever the budget (unhealthyPodEvictionPolicy: AlwaysAllow), where the policy's IfHealthyBudget does not"
			}
			if c.Weakens = c.Weakness != ""; c.Weakens {
				c.Message += " and " + c.Weakness + ": while holdfast is down, that PodDisruptionBudget is the only floor; make it as strict as the policy or delete it"
			}
		}
		return c
	}
	for _, o := range ns.Workloads {
		if o.UID == w.UID || o.Namespace != w.Namespace {
			continue
		}
		if ok, err := m.Matches(w.Selector, o.PodLabels); err == nil && ok {
			return &Coverage{Message: fmt.Sprintf("the selector of %s %s also selects the pods of %s %s", w.Kind, w.Name, o.Kind, o.Name)}
		}
	}
	return nil
}

// covers is whether a PDB's selector matches the workload's template labels or any of its
// live pods' labels.
func covers(m *policy.Matcher, sel *metav1.LabelSelector, template map[string]string, pods []map[string]string) bool {
	if ok, err := m.Matches(sel, template); err == nil && ok {
		return true
	}
	return slices.ContainsFunc(pods, func(l map[string]string) bool {
		ok, err := m.Matches(sel, l)
		return err == nil && ok
	})
}

// partly counts the live pods a selector covers, of all of them; every one when it
// matches the template's labels (then it covers the pods to come too).
func partly(m *policy.Matcher, sel *metav1.LabelSelector, template map[string]string, pods []map[string]string) (n, of int) {
	if ok, err := m.Matches(sel, template); err == nil && ok {
		return len(pods), len(pods)
	}
	for _, l := range pods {
		if ok, err := m.Matches(sel, l); err == nil && ok {
			n++
		}
	}
	return n, len(pods)
}

// allowedOf is how many of the workload's pods another PDB lets be disrupted at once when
// all are healthy, as kube's disruption controller resolves it over every pod it covers
// (getExpectedPodCount): a maxUnavailable or a percentage resolves against the scale of
// every workload it covers (a PDB over two workloads lets more of one go than its own count
// would), and kube cannot scale a DaemonSet, so such a PDB over one allows no disruption at
// all (failSafe). Its budget is shared, so at most the workload's own count goes.
func allowedOf(m *policy.Matcher, p *policyv1.PodDisruptionBudget, w workload.Meta, all []workload.Meta) int32 {
	covered := []workload.Meta{w}
	for _, o := range all {
		if o.UID == w.UID || o.Namespace != w.Namespace {
			continue
		}
		if ok, err := m.Matches(p.Spec.Selector, o.PodLabels); err == nil && ok {
			covered = append(covered, o)
		}
	}
	scaled := p.Spec.MaxUnavailable != nil || (p.Spec.MinAvailable != nil && p.Spec.MinAvailable.Type == intstr.String)
	var expected int32
	for _, c := range covered {
		if scaled && c.Kind == v1alpha1.KindDaemonSet {
			return 0
		}
		expected += c.Expected
	}
	return min(Allowed(&p.Spec, expected), w.Expected)
}

// unhealthyOf is a PDB's unhealthyPodEvictionPolicy, IfHealthyBudget when unset as kube
// reads it.
func unhealthyOf(spec *policyv1.PodDisruptionBudgetSpec) policyv1.UnhealthyPodEvictionPolicyType {
	if spec.UnhealthyPodEvictionPolicy == nil {
		return policyv1.IfHealthyBudget
	}
	return *spec.UnhealthyPodEvictionPolicy
}

// Allowed is how many of expected pods a PDB lets be disrupted at once when all are
// healthy, as kube's disruption controller resolves it (pkg/controller/disruption,
// getExpectedPodCount): percentages of maxUnavailable and minAvailable round up.
func Allowed(spec *policyv1.PodDisruptionBudgetSpec, expected int32) int32 {
	var healthy int
	switch {
	case spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0
		}
		healthy = int(expected) - n
	case spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0
		}
		healthy = n
	default:
		return 0
	}
	return int32(max(int(expected)-healthy, 0))
}
