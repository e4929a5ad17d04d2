package eviction

import (
	"testing"

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// maxUnselectedAllocs guards BenchmarkEvictionUnselected's allocations (33 when this was
// written): every eviction in the cluster takes this path.
const maxUnselectedAllocs = 40

func TestEvictionUnselectedAllocs(t *testing.T) {
	h, body := unselectedScene(t)
	again := utiltesting.Repeat(h, Path, body)
	if n := testing.AllocsPerRun(100, func() { again() }); n > maxUnselectedAllocs {
		t.Errorf("the eviction of an unselected pod allocates %.0f times, more than %d", n, maxUnselectedAllocs)
	}
}
