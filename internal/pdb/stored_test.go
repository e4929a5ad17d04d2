package pdb

import (
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// TestGeneratedPDBStoredForm pins the PDBs the generator writes (Desired): their names
// (kind and workload name, cut and hashed when too long), the labels by which holdfast
// finds a policy's PDBs (the policy's name cut and hashed when too long), the owner
// reference to the workload, and the budget.
func TestGeneratedPDBStoredForm(t *testing.T) {
	long := agent("Deployment", 3)
	long.Name = strings.Repeat("a-workload-with-a-long-name-", 10)
	var pdbs []*policyv1.PodDisruptionBudget
	for _, c := range []struct {
		w      workload.Meta
		policy *v1alpha1.DisruptionPolicy
	}{
		{agent("DaemonSet", 4), agentPolicy("agents", intstr.FromInt32(1), nil)},
		{agent("Deployment", 4), agentPolicy("agents", intstr.FromString("25%"), nil)},
		{long, agentPolicy(strings.Repeat("a-policy-with-a-long-name-", 3), intstr.FromInt32(1), nil)},
	} {
		p := Desired(c.w, []*v1alpha1.DisruptionPolicy{c.policy})
		if p == nil {
			t.Fatalf("no PDB for %s", c.w.Ref)
		}
		p.TypeMeta = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
		pdbs = append(pdbs, p)
	}
	golden.AssertJSON(t, "testdata/pdbs.golden", pdbs)
}
