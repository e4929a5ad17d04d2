package eviction

import (
	"testing"

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// maxUnselectedAllocs guards BenchmarkEvictionUnselected's allocations at the figure
// holdfast's performance target sets (25 when this was last lowered): every eviction in
// the cluster takes this path.
const maxUnselectedAllocs = 25

func TestEvictionUnselectedAllocs(t *testing.T) {
	h, body := unselectedScene(t)
	again := utiltesting.Repeat(h, Path, body)
	if n := testing.AllocsPerRun(100, func() { again() }); n > maxUnselectedAllocs {
		t.Errorf("the eviction of an unselected pod allocates %.0f times, more than %d", n, maxUnselectedAllocs)
	}
}
