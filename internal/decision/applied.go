package decision

// Applied names the policies that applied to a request, in the order they were evaluated:
// the metrics count the request once under each. The first two are held in the value
// itself, so that a decision on the hot path (one or two policies apply to most requests)
// allocates nothing for them.
type Applied struct {
	first [2]string
	n     int
	rest  []string // every name, once more than len(first) applied
}

// Add records that policy applied.
func (a *Applied) Add(policy string) {
	if a.rest == nil && a.n < len(a.first) {
		a.first[a.n] = policy
		a.n++
		return
	}
	if a.rest == nil {
		a.rest = append(make([]string, 0, 2*len(a.first)), a.first[:a.n]...)
	}
	a.rest = append(a.rest, policy)
}

// Names are the policies that applied, in order; empty when none did.
func (a *Applied) Names() []string {
	if a.rest != nil {
		return a.rest
	}
	return a.first[:a.n]
}
