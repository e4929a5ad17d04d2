package kubemodel

import "testing"

// TestPDBAllows: kube's eviction check against a PDB's counts, as eviction.go decides it.
func TestPDBAllows(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		ready                    bool
		healthy, desired         int
		alwaysAllow              bool
		wantAllowed, wantDisrupt bool
	}{
		{"a Ready pod within the budget: evicted and counted disrupted", true, 3, 2, false, true, true},
		{"a Ready pod with no disruption left: 429", true, 2, 2, false, false, false},
		{"a pod not Ready, AlwaysAllow: evicted without a decrement", false, 1, 2, true, true, false},
		{"a pod not Ready, IfHealthyBudget, the budget met: evicted without a decrement", false, 2, 2, false, true, false},
		{"a pod not Ready, IfHealthyBudget, the budget not met: 429", false, 1, 2, false, false, false},
		{"a pod not Ready, IfHealthyBudget, nothing desired: checked as a Ready one", false, 1, 0, false, true, true},
	} {
		allowed, disrupts := PDBAllows(tc.ready, tc.healthy, tc.desired, tc.alwaysAllow)
		if allowed != tc.wantAllowed || disrupts != tc.wantDisrupt {
			t.Errorf("%s: allowed %t disrupts %t, want %t %t", tc.name, allowed, disrupts, tc.wantAllowed, tc.wantDisrupt)
		}
	}
}
