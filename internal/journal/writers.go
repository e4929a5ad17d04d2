package journal

import "time"

// Attribute gives the current revision of j, when it became current since prev (or j has
// no predecessor journal), the writer that last changed the workload's template:
// the leader records the writer of each template as it sees it become current.
func (j *Journal) Attribute(prev *Journal, writer string) {
	cur := j.Current()
	if cur == nil || cur.Writer != "" || writer == "" {
		return
	}
	if was := prev.Current(); was != nil && was.Template == cur.Template && was.Since.Equal(cur.Since) {
		return // not a change: the writer of a scale or a status update is not the template's
	}
	cur.Writer = writer
}

// Fight is two writers alternating a workload's templates: one changed the template, and
// within the revert window another changed it again.
type Fight struct {
	// First changed the template, then Second changed it within the window.
	First, Second string
	// At is when Second's change became current; Until when the pair leaves the window.
	At, Until time.Time
}

// Fight is the newest pair of consecutive template changes within window before now by
// two different writers, if any. A change is a revision that replaced another (the
// journal's first revision is where it started, no change); a change whose writer is
// unknown pairs with none. A window of 0 finds none.
func (j *Journal) Fight(window time.Duration, now time.Time) (Fight, bool) {
	if j == nil || window <= 0 || j.Deleted != nil {
		return Fight{}, false
	}
	from := now.Add(-window)
	for i := len(j.Revisions) - 1; i >= 2; i-- {
		first, second := &j.Revisions[i-1], &j.Revisions[i]
		if first.Since.Before(from) {
			break // every earlier change is older still
		}
		if first.Writer != "" && second.Writer != "" && first.Writer != second.Writer {
			return Fight{First: first.Writer, Second: second.Writer, At: second.Since, Until: first.Since.Add(window)}, true
		}
	}
	return Fight{}, false
}
