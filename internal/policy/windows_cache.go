package policy

import (
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// maxParsedWindows bounds the cache: a cluster has a few policies with windows, each with a
// few versions of them; past this many distinct lists the cache starts again.
const maxParsedWindows = 512

// parsed is the process's cache of parsed windows.
var parsed windowsCache

// windowsCache keeps what parseWindows made of each distinct list of windows, keyed by the
// lists' content (not a policy's name or generation: the same windows parse the same
// wherever they are, and a policy edited in place can never be answered from its old
// windows). A parsed Windows is never changed after parsing, so it is shared.
type windowsCache struct {
	mu      sync.Mutex
	entries map[string]parsedWindows
}

type parsedWindows struct {
	windows Windows
	errs    field.ErrorList
}

func (c *windowsCache) get(ws []v1alpha1.Window) (Windows, field.ErrorList) {
	var buf [256]byte
	key := windowsKey(buf[:0], ws)
	c.mu.Lock()
	e, ok := c.entries[string(key)] // a lookup by a converted slice does not copy it
	c.mu.Unlock()
	if !ok {
		e.windows, e.errs = parseWindows(ws)
		c.mu.Lock()
		if c.entries == nil || len(c.entries) >= maxParsedWindows {
			c.entries = make(map[string]parsedWindows)
		}
		c.entries[string(key)] = e
		c.mu.Unlock()
	}
	// Clipped, so that a caller appending to the errors copies them.
	return e.windows, slices.Clip(e.errs)
}

// windowsKey appends to b the content of ws, every field that parsing reads, each string
// preceded by its length so that no two lists share a key.
func windowsKey(b []byte, ws []v1alpha1.Window) []byte {
	for _, w := range ws {
		for _, s := range [...]string{w.Name, w.Schedule, w.TimeZone, string(w.Action)} {
			b = strconv.AppendInt(b, int64(len(s)), 10)
			b = append(b, ':')
			b = append(b, s...)
		}
		b = strconv.AppendInt(b, int64(w.Duration.Duration), 10)
		b = append(b, ';')
	}
	return b
}
