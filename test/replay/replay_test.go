package replay

import (
	"testing"
)

// TestGenerateCoversEveryShape: the sequences start from every kind and strategy, have
// the steps asked for, and the model runs them the same way twice.
func TestGenerateCoversEveryShape(t *testing.T) {
	seqs := Generate(1, 2*Shapes(), 10)
	shapes := map[string]bool{}
	for _, s := range seqs {
		shapes[s.Shape()] = true
		if len(s.Steps) != 11 {
			t.Fatalf("%s has %d steps, want 11", s.Name, len(s.Steps))
		}
		a, b := Run(s, Correct), Run(s, Correct)
		for i := range a {
			if !a[i].Equal(b[i]) {
				t.Fatalf("%s step %d: %s then %s", s.Name, i, a[i], b[i])
			}
		}
	}
	if len(shapes) != 8 {
		t.Errorf("shapes %v, want the 8 kinds and strategies", shapes)
	}
}

// TestWrongModelsDiffer: a model with a fault tells, over the same sequences, another
// story than the correct one: the self-test's faults are visible at quiescent points.
func TestWrongModelsDiffer(t *testing.T) {
	seqs := Generate(1, 3*Shapes(), 10)
	for _, fault := range []Fault{OldTemplateOrdinals, IgnoreNodeJoins} {
		diffs := 0
		for _, s := range seqs {
			a, b := Run(s, Correct), Run(s, fault)
			diffs += len(a) - equalCount(a, b)
		}
		if diffs == 0 {
			t.Errorf("fault %d: no point differs from the correct model", fault)
		}
	}
}

func equalCount(a, b []Observation) int {
	n := 0
	for i := range a {
		if a[i].Equal(b[i]) {
			n++
		}
	}
	return n
}
