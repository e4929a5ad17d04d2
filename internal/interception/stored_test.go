package interception

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// TestEntriesStoredForm pins the entries the leader writes into the scoped configuration
// (Name of the installed one): their names, which follow what they select, and their
// content, for a rollout policy with a scale entry, one with a name too long to keep and a
// selector holdfast cannot evaluate (it has no entry: it selects nothing), and an eviction
// policy that generates PDBs and guards deletes (so it has the floor's and the pod DELETE
// entries too). A leader of one
// release that names or builds an entry otherwise than another's widens and narrows the
// configuration at each change of leader.
func TestEntriesStoredForm(t *testing.T) {
	scaled := rolloutPolicy("hosted-control-planes", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet}
		s.Rules.ArgsMatchReplicas = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	})
	invalid := rolloutPolicy(strings.Repeat("a-long-policy-name-", 4), func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	})
	evictions := v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		PDB:          &v1alpha1.PDBGeneration{Generate: true},
		GuardDeletes: true,
		Targets:      v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}}}}
	ws, _ := Entries([]v1alpha1.RolloutPolicy{scaled, invalid}, []v1alpha1.DisruptionPolicy{evictions}, settings)
	golden.AssertJSON(t, "testdata/entries.golden", map[string]any{"configuration": Name("holdfast"), "webhooks": ws})
}
