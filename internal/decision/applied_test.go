package decision

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestApplied(t *testing.T) {
	var want []string
	var a Applied
	if len(a.Names()) != 0 {
		t.Fatalf("zero value names %v", a.Names())
	}
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		a.Add(p)
		want = append(want, p)
		if diff := cmp.Diff(want, a.Names()); diff != "" {
			t.Fatalf("after %s (-want +got):\n%s", p, diff)
		}
	}
}
