package pdb

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

func agentPolicy(name string, maxUnavailable intstr.IntOrString, mut func(*v1alpha1.DisruptionPolicySpec)) *v1alpha1.DisruptionPolicy {
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.DisruptionPolicySpec{
		MaxUnavailable: &maxUnavailable, PDB: &v1alpha1.PDBGeneration{Generate: true},
		Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}
	if mut != nil {
		mut(&p.Spec)
	}
	return p
}

func agent(kind v1alpha1.WorkloadKind, expected int32) workload.Meta {
	return workload.Meta{Ref: workload.Ref{Kind: kind, Namespace: "kube-system", Name: "agent", UID: "u"},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, PodLabels: map[string]string{"app": "agent", "tier": "node"},
		Expected: expected}
}

func TestDesired(t *testing.T) {
	ifHealthy := policyv1.IfHealthyBudget
	cases := map[string]struct {
		w        workload.Meta
		policies []*v1alpha1.DisruptionPolicy
		// want: nil for no PDB; otherwise the policy named and the budget.
		wantNone       bool
		policy         string
		maxUnavailable *intstr.IntOrString
		minAvailable   *intstr.IntOrString
		unhealthy      policyv1.UnhealthyPodEvictionPolicyType
	}{
		"a Deployment gets maxUnavailable": {w: agent("Deployment", 4), policies: []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromInt32(1), nil)},
			policy: "a", maxUnavailable: ptr.To(intstr.FromInt32(1)), unhealthy: policyv1.AlwaysAllow},
		"a StatefulSet keeps a percentage": {w: agent("StatefulSet", 5), policies: []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromString("25%"), nil)},
			policy: "a", maxUnavailable: ptr.To(intstr.FromString("25%")), unhealthy: policyv1.AlwaysAllow},
		"a DaemonSet gets an integer minAvailable": {w: agent("DaemonSet", 6), policies: []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromInt32(1), nil)},
			policy: "a", minAvailable: ptr.To(intstr.FromInt32(5)), unhealthy: policyv1.AlwaysAllow},
		"a DaemonSet's percentage rounds up as the webhook does": {w: agent("DaemonSet", 6), policies: []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromString("25%"), nil)},
			policy: "a", minAvailable: ptr.To(intstr.FromInt32(4)), unhealthy: policyv1.AlwaysAllow},
		"the smallest maxUnavailable wins": {w: agent("Deployment", 10), policies: []*v1alpha1.DisruptionPolicy{
			agentPolicy("loose", intstr.FromString("50%"), nil), agentPolicy("strict", intstr.FromInt32(1), nil)},
			policy: "strict", maxUnavailable: ptr.To(intstr.FromInt32(1)), unhealthy: policyv1.AlwaysAllow},
		"unhealthyPodEvictionPolicy comes from the policy": {w: agent("Deployment", 3), policies: []*v1alpha1.DisruptionPolicy{
			agentPolicy("a", intstr.FromInt32(1), func(s *v1alpha1.DisruptionPolicySpec) { s.UnhealthyPodEvictionPolicy = &ifHealthy })},
			policy: "a", maxUnavailable: ptr.To(intstr.FromInt32(1)), unhealthy: policyv1.IfHealthyBudget},
		"below minReplicas there is no PDB": {w: agent("Deployment", 1), policies: []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromInt32(1), nil)},
			wantNone: true},
		"minReplicas is the policy's": {w: agent("Deployment", 3), policies: []*v1alpha1.DisruptionPolicy{
			agentPolicy("a", intstr.FromInt32(1), func(s *v1alpha1.DisruptionPolicySpec) { s.PDB.MinReplicas = ptr.To[int32](4) })},
			wantNone: true},
		"no policy, no PDB": {w: agent("Deployment", 3), wantNone: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Desired(tc.w, tc.policies)
			if tc.wantNone {
				if got != nil {
					t.Fatalf("want no PDB, got %+v", got.Spec)
				}
				return
			}
			if got == nil {
				t.Fatal("want a PDB, got none")
			}
			if got.Labels[PolicyLabel] != tc.policy || got.Labels[ManagedByLabel] != ManagedBy {
				t.Errorf("labels = %v", got.Labels)
			}
			if diff := cmp.Diff(tc.maxUnavailable, got.Spec.MaxUnavailable); diff != "" {
				t.Errorf("maxUnavailable (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.minAvailable, got.Spec.MinAvailable); diff != "" {
				t.Errorf("minAvailable (-want +got):\n%s", diff)
			}
			if *got.Spec.UnhealthyPodEvictionPolicy != tc.unhealthy {
				t.Errorf("unhealthyPodEvictionPolicy = %s", *got.Spec.UnhealthyPodEvictionPolicy)
			}
			if diff := cmp.Diff(tc.w.Selector, got.Spec.Selector); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != tc.w.UID || ref.Kind != string(tc.w.Kind) {
				t.Errorf("owner = %+v", got.OwnerReferences)
			}
		})
	}
}

func TestGenerating(t *testing.T) {
	w := agent("Deployment", 3)
	if !Generating(nil, agentPolicy("a", intstr.FromInt32(1), nil), w, nil) {
		t.Error("a generating policy selecting the pods must generate")
	}
	off := agentPolicy("a", intstr.FromInt32(1), func(s *v1alpha1.DisruptionPolicySpec) { s.PDB.Generate = false })
	suspended := agentPolicy("a", intstr.FromInt32(1), func(s *v1alpha1.DisruptionPolicySpec) { s.Suspend = true })
	other := agentPolicy("a", intstr.FromInt32(1), func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	})
	deleting := agentPolicy("a", intstr.FromInt32(1), nil)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	for name, p := range map[string]*v1alpha1.DisruptionPolicy{"generate off": off, "suspended": suspended, "other pods": other, "being deleted": deleting} {
		if Generating(nil, p, w, nil) {
			t.Errorf("%s: must not generate", name)
		}
	}
}

func TestConflict(t *testing.T) {
	w := agent("Deployment", 3)
	user := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "user"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "node"}}}}
	ours := *Desired(w, []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromInt32(1), nil)})
	elsewhere := user
	elsewhere.Namespace = "other"

	if c := Conflict(nil, w, &ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{ours, elsewhere}}); c != nil {
		t.Errorf("holdfast's own PDB and PDBs of other namespaces are no conflict: %s", c.Message)
	}
	if c := Conflict(nil, w, &ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{user}}); c == nil || c.By == nil || c.By.Name != "user" {
		t.Errorf("a user PDB over the same pods is a conflict, by that PDB: %+v", c)
	}
	forged := user
	forged.Labels = map[string]string{ManagedByLabel: ManagedBy}
	if c := Conflict(nil, w, &ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{forged}}); c == nil {
		t.Error("a PDB that only wears holdfast's managed-by label is someone else's, and a conflict")
	}
	unselecting := user
	unselecting.Spec.Selector = nil
	if c := Conflict(nil, w, &ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{unselecting}}); c != nil {
		t.Errorf("a PDB without a selector covers no pod (kube's PDB API): %s", c.Message)
	}
	everything := user
	everything.Spec.Selector = &metav1.LabelSelector{}
	if c := Conflict(nil, w, &ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{everything}}); c == nil {
		t.Error("selector: {} covers every pod of its namespace, these included")
	}
	sibling := agent("DaemonSet", 6)
	sibling.UID, sibling.Name = "s", "agent-ds"
	if c := Conflict(nil, w, &ours, Namespace{Workloads: []workload.Meta{w, sibling}}); c == nil || c.By != nil || c.Weakens {
		t.Errorf("a selector that covers another workload's pods is a conflict, by no PDB: %+v", c)
	}
	sibling.PodLabels = map[string]string{"app": "other"}
	if c := Conflict(nil, w, &ours, Namespace{Workloads: []workload.Meta{w, sibling}}); c != nil {
		t.Errorf("no overlap, no conflict: %s", c.Message)
	}
}

// TestAnotherPDBWeakensTheFloor: another PDB over the pods is judged by how many of them it
// lets go at once, resolved as kube's disruption controller resolves it (percentages round
// up), against the policy's budget: stricter or equal holds the floor, weaker is reported.
func TestAnotherPDBWeakensTheFloor(t *testing.T) {
	w := agent("Deployment", 4)
	ours := *Desired(w, []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromInt32(1), nil)})
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "node"}}
	for name, c := range map[string]struct {
		maxUnavailable, minAvailable *intstr.IntOrString
		allowed                      int32
		weakens                      bool
	}{
		"maxUnavailable 1, as strict":           {maxUnavailable: ptr.To(intstr.FromInt32(1)), allowed: 1},
		"maxUnavailable 0, stricter":            {maxUnavailable: ptr.To(intstr.FromInt32(0)), allowed: 0},
		"maxUnavailable 100%, the attack":       {maxUnavailable: ptr.To(intstr.FromString("100%")), allowed: 4, weakens: true},
		"maxUnavailable 26% rounds up to 2":     {maxUnavailable: ptr.To(intstr.FromString("26%")), allowed: 2, weakens: true},
		"maxUnavailable 25% is 1":               {maxUnavailable: ptr.To(intstr.FromString("25%")), allowed: 1},
		"minAvailable 3, as strict":             {minAvailable: ptr.To(intstr.FromInt32(3)), allowed: 1},
		"minAvailable 50% lets 2 go":            {minAvailable: ptr.To(intstr.FromString("50%")), allowed: 2, weakens: true},
		"minAvailable 51% rounds up to 3":       {minAvailable: ptr.To(intstr.FromString("51%")), allowed: 1},
		"minAvailable above the pods lets none": {minAvailable: ptr.To(intstr.FromInt32(9)), allowed: 0},
		"neither field lets none":               {allowed: 0},
	} {
		t.Run(name, func(t *testing.T) {
			other := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "theirs"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel, MaxUnavailable: c.maxUnavailable, MinAvailable: c.minAvailable}}
			if got := Allowed(&other.Spec, w.Expected); got != c.allowed {
				t.Errorf("Allowed = %d, want %d", got, c.allowed)
			}
			got := Conflict(nil, w, &ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{other}})
			if got == nil || got.Weakens != c.weakens {
				t.Fatalf("got %+v, want a conflict that weakens: %t", got, c.weakens)
			}
			if c.weakens && !strings.Contains(got.Message, "make it as strict as the policy or delete it") {
				t.Errorf("the message names no way out: %s", got.Message)
			}
		})
	}
}

// TestLongNamesFit: a policy name longer than a label value and a workload name as long as
// an object name still give a valid label and a valid PDB name, unique and never ending in
// '-' or '.', wherever the cut falls.
func TestLongNamesFit(t *testing.T) {
	base := strings.Repeat("tenant.", 8) + "konnectivity-agents" // 75 characters
	for cut := 40; cut < 60; cut++ {
		long := base[:cut] + "-." + base[cut:]
		value := policyLabelValue(long)
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			t.Fatalf("label value %q for policy %q: %v", value, long, errs)
		}
		if policyLabelValue(long+"x") == value {
			t.Errorf("two long policy names share the label value %q", value)
		}
	}
	if got := policyLabelValue("agents"); got != "agents" {
		t.Errorf("a short name is its own label value, got %q", got)
	}
	w := workload.Ref{Kind: v1alpha1.KindStatefulSet, Name: strings.Repeat("a", 222) + "-" + strings.Repeat("b", 30)}
	name := Name(w)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Fatalf("PDB name %q: %v", name, errs)
	}
	w2 := w
	w2.Name += "c"
	if Name(w2) == name {
		t.Error("two long workload names share a PDB name")
	}
	long := agentPolicy(strings.Repeat("p", 70), intstr.FromInt32(1), nil)
	if got := Desired(agent(v1alpha1.KindDeployment, 3), []*v1alpha1.DisruptionPolicy{long}); got == nil ||
		len(validation.IsValidLabelValue(got.Labels[PolicyLabel])) > 0 {
		t.Errorf("the PDB of a policy with a 70-character name: %+v", got)
	}
}

// TestAnotherPDBIsJudgedAsKubeJudgesIt: another PDB is matched against the pods as kube
// matches it, and its budget resolved as kube's disruption controller resolves it, so that
// neither a second PDB (500s on every eviction) nor a weaker floor goes unseen:
//   - a selector on a label only the pods carry (pod-template-hash) covers them;
//   - an integer minAvailable over two workloads counts both's pods, so it lets all of one go;
//   - a maxUnavailable over a DaemonSet's pods allows nothing (kube cannot scale a
//     DaemonSet: its failSafe), which is no weaker floor;
//   - AlwaysAllow for unhealthy pods is weaker than a policy's IfHealthyBudget.
func TestAnotherPDBIsJudgedAsKubeJudgesIt(t *testing.T) {
	pdbOver := func(sel map[string]string, mut func(*policyv1.PodDisruptionBudgetSpec)) policyv1.PodDisruptionBudget {
		p := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "theirs"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
		if mut != nil {
			mut(&p.Spec)
		}
		return p
	}
	dep := agent("Deployment", 3)
	other := agent("Deployment", 3)
	other.Name, other.UID, other.Selector = "other", "o", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	other.PodLabels = map[string]string{"app": "other", "tier": "node"}
	ds := agent("DaemonSet", 6)
	hashed := []map[string]string{{"app": "agent", "tier": "node", "pod-template-hash": "5d8f"}}
	ifHealthy := func(s *v1alpha1.DisruptionPolicySpec) {
		s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
	}
	for name, c := range map[string]struct {
		w       workload.Meta
		policy  *v1alpha1.DisruptionPolicy
		pdb     policyv1.PodDisruptionBudget
		ns      Namespace
		covers  bool
		weakens bool
	}{
		"a selector on pod-template-hash covers the live pods": {w: dep, pdb: pdbOver(map[string]string{"pod-template-hash": "5d8f"}, nil),
			ns: Namespace{Pods: hashed}, covers: true},
		"a pod-template-hash no pod has covers nothing": {w: dep, pdb: pdbOver(map[string]string{"pod-template-hash": "0000"}, nil),
			ns: Namespace{Pods: hashed}},
		"minAvailable 3 over two workloads of 3 lets all of one go": {w: dep, pdb: pdbOver(map[string]string{"tier": "node"}, func(s *policyv1.PodDisruptionBudgetSpec) {
			s.MaxUnavailable, s.MinAvailable = nil, ptr.To(intstr.FromInt32(3))
		}), ns: Namespace{Workloads: []workload.Meta{dep, other}}, covers: true, weakens: true},
		"minAvailable 3 over its own 3 pods lets none go": {w: dep, pdb: pdbOver(map[string]string{"app": "agent"}, func(s *policyv1.PodDisruptionBudgetSpec) {
			s.MaxUnavailable, s.MinAvailable = nil, ptr.To(intstr.FromInt32(3))
		}), ns: Namespace{Workloads: []workload.Meta{dep, other}}, covers: true},
		"maxUnavailable 50% over a DaemonSet's pods allows nothing": {w: ds, pdb: pdbOver(map[string]string{"app": "agent"}, func(s *policyv1.PodDisruptionBudgetSpec) {
			s.MaxUnavailable = ptr.To(intstr.FromString("50%"))
		}), covers: true},
		"minAvailable 1 over a DaemonSet's 6 pods lets 5 go": {w: ds, pdb: pdbOver(map[string]string{"app": "agent"}, func(s *policyv1.PodDisruptionBudgetSpec) {
			s.MaxUnavailable, s.MinAvailable = nil, ptr.To(intstr.FromInt32(1))
		}), covers: true, weakens: true},
		"AlwaysAllow against the policy's IfHealthyBudget": {w: dep, policy: agentPolicy("a", intstr.FromInt32(1), ifHealthy),
			pdb: pdbOver(map[string]string{"app": "agent"}, func(s *policyv1.PodDisruptionBudgetSpec) {
				s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
			}), covers: true, weakens: true},
		"unset (IfHealthyBudget) against the policy's IfHealthyBudget": {w: dep, policy: agentPolicy("a", intstr.FromInt32(1), ifHealthy),
			pdb: pdbOver(map[string]string{"app": "agent"}, nil), covers: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := c.policy
			if p == nil {
				p = agentPolicy("a", intstr.FromInt32(1), nil)
			}
			ours := Desired(c.w, []*v1alpha1.DisruptionPolicy{p})
			c.ns.PDBs = []policyv1.PodDisruptionBudget{c.pdb}
			got := Conflict(nil, c.w, ours, c.ns)
			if (got != nil) != c.covers {
				t.Fatalf("conflict %+v, want covered: %t", got, c.covers)
			}
			if got != nil && got.Weakens != c.weakens {
				t.Fatalf("weakens %t (%s), want %t", got.Weakens, got.Message, c.weakens)
			}
		})
	}
}

// TestAPDBOverSomePodsWeakensTheFloor: a PDB over one ordinal (or one relabelled pod)
// makes holdfast's floor step back for every pod (two PDBs over one pod is kube's 500),
// and the other pods are left with none: that weakens the floor, however strict it is.
func TestAPDBOverSomePodsWeakensTheFloor(t *testing.T) {
	w := agent("StatefulSet", 3)
	ours := Desired(w, []*v1alpha1.DisruptionPolicy{agentPolicy("a", intstr.FromInt32(1), nil)})
	pods := []map[string]string{
		{"app": "agent", "tier": "node", "statefulset.kubernetes.io/pod-name": "agent-0"},
		{"app": "agent", "tier": "node", "statefulset.kubernetes.io/pod-name": "agent-1"},
		{"app": "agent", "tier": "node", "statefulset.kubernetes.io/pod-name": "agent-2"},
	}
	one := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "db-0"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"statefulset.kubernetes.io/pod-name": "agent-0"}}}}
	c := Conflict(nil, w, ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{one}, Pods: pods})
	if c == nil || !c.Weakens || !strings.Contains(c.Message, "covers only 1 of its 3 pods") {
		t.Fatalf("a PDB over one ordinal: %+v, want a weakening naming the pods left without a floor", c)
	}
	all := one
	all.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
	if c := Conflict(nil, w, ours, Namespace{PDBs: []policyv1.PodDisruptionBudget{all}, Pods: pods}); c == nil || c.Weakens {
		t.Fatalf("a stricter PDB over every pod: %+v, want coverage that holds the floor", c)
	}
}
