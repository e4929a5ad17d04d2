package eviction

import (
	"net/http"
	"testing"
)

// maxUnselectedAllocs guards BenchmarkEvictionUnselected's allocations (58 when this was
// written): every eviction in the cluster takes this path.
const maxUnselectedAllocs = 65

func TestEvictionUnselectedAllocs(t *testing.T) {
	h, body := unselectedScene(t)
	w := &discard{header: http.Header{}}
	if n := testing.AllocsPerRun(100, func() { serveEviction(h, body, w) }); n > maxUnselectedAllocs {
		t.Errorf("the eviction of an unselected pod allocates %.0f times, more than %d", n, maxUnselectedAllocs)
	}
}
