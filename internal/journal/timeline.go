package journal

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Timeline is a workload's revisions as a decision reads them: the journal's, or the
// cluster's history where there is no journal, with what neither has recorded yet. Its
// revisions may be the journal's own: read them, never change them.
type Timeline struct {
	// Revisions are oldest first; the last is the current one.
	Revisions []Revision
	// Recorded is a journal that observed the request's old object: what it says of the
	// current revision is exact.
	Recorded bool
	// Unjournaled is the timeline of an existing workload that no journal records (none
	// yet, lost, or retired while it was not guarded), read from the cluster's history:
	// its revisions are dated at their creation or their pods' last activity, and whether
	// a rollout finished is not known.
	Unjournaled bool
	// Held is, on a CREATE, that the journal last saw the workload of this name, now
	// deleted, hold its rollout (Journal.Held): a CREATE that does not hold it lifts the
	// hold over the pods it adopts.
	Held bool
	// updated is the journal's Observed.Updated for a DaemonSet's current revision, when
	// measured says the journal records it.
	updated  int32
	measured bool
}

// Progressed is whether r, the current revision as the cluster's history shows it now, has
// progressed since the journal last looked: more of its pods available than the journal
// saw, or for a DaemonSet whose journal measures it, more on the nodes that needed the
// rollout when it began (history.Revision.ServingBefore).
func (t *Timeline) Progressed(r *history.Revision) bool {
	cur := t.Current()
	if cur == nil {
		return false
	}
	if t.measured {
		return r.ServingBefore(cur.Since) > t.updated
	}
	return r.Serving > cur.Available
}

// Current is the current revision, nil when none is known.
func (t *Timeline) Current() *Revision {
	if len(t.Revisions) == 0 {
		return nil
	}
	return &t.Revisions[len(t.Revisions)-1]
}

// Previous is the revision the current one replaced, nil when none is known.
func (t *Timeline) Previous() *Revision {
	if len(t.Revisions) < 2 {
		return nil
	}
	return &t.Revisions[len(t.Revisions)-2]
}

// LeftAt is when the template with fingerprint sum, or of the shape (when not empty),
// last stopped being current; false when it is the current one or was never current.
func (t *Timeline) LeftAt(sum, shape string) (time.Time, bool) {
	for i := len(t.Revisions) - 2; i >= 0; i-- {
		if r := t.Revisions[i]; (r.Template == sum || (shape != "" && r.Shape == shape)) && r.Until != nil {
			return *r.Until, true
		}
	}
	return time.Time{}, false
}

// ShapedSince is whether a revision of another template than the current one, that
// stopped being current at or after since, has a shape: only then can a template of
// another fingerprint be a return to it.
func (t *Timeline) ShapedSince(since time.Time) bool {
	cur := t.Current()
	for _, r := range t.Revisions {
		if r.Shape != "" && r.Until != nil && !r.Until.Before(since) && (cur == nil || r.Template != cur.Template) {
			return true
		}
	}
	return false
}

// same is whether two revisions are one template, or differ only in flags.
func same(a, b *Revision) bool {
	return a.Template == b.Template || (a.Shape != "" && a.Shape == b.Shape)
}

// ReturnsSince counts the revisions that became current at or after since by going back
// to a template that had stopped being current less than window before (I3).
func (t *Timeline) ReturnsSince(since time.Time, window time.Duration) int {
	n := 0
	for k := range t.Revisions {
		r := t.Revisions[k]
		if r.Since.Before(since) {
			continue
		}
		for i := k - 1; i >= 0; i-- {
			if e := &t.Revisions[i]; same(e, &r) && e.Until != nil && r.Since.Sub(*e.Until) < window {
				n++
				break
			}
		}
	}
	return n
}

// View is the timeline a decision about a request on old reads (old is nil on CREATE).
// It is the journal j when there is one (a journal of a deleted workload of the same
// kind and name included: a re-created workload continues its timeline), else the
// cluster's history h. A template old rolls out that neither has recorded (the leader
// lags, or the journal was lost) became current now and has not finished, and a held
// template the journal has not seen may have rolled out: so a lag never lets through
// what the journal would refuse. A current revision whose rollout old's status shows
// finished is finished, whether or not the journal has caught up.
func View(j *Journal, kind v1alpha1.WorkloadKind, old *workload.Workload, h history.History, flags []v1alpha1.ArgMatchesReplicas, now time.Time) Timeline {
	var t Timeline
	if j != nil && j.Deleted != nil && old != nil {
		// Retired while the workload (or the one of its name it adopted from) was not
		// guarded, and guarded again a moment ago: what the leader will record once it sees
		// it (Observe), a change made outside dated now, as the entry that brought it in was
		// judged (checkEnteredChange). Dated from the cluster's history alone, a template the
		// workload left outside a moment ago would read as left when the one after it was
		// created, and a return to it as outside revertWindow. Whether the rollout finished
		// since is not known (it may have finished and lost a pod): a rollout in progress
		// reads as unfinished, its stall clock from now, as without a journal.
		seen := Observe(j, old, h, flags, now)
		if cur := seen.Current(); cur != nil {
			if cur.Since.Equal(now) {
				cur.Pending, cur.Lagging = true, true
			}
			if old.Rollout.InProgress && cur.Finished != nil {
				cur.Finished, cur.Progressed = nil, now
			}
		}
		t.Revisions = seen.Revisions
		return t
	}
	if j != nil {
		t.Revisions = j.Revisions // the store's: cloned before it is changed below
		t.Recorded = old != nil && j.UID == old.UID && j.Generation >= old.Generation
		if j.Observed != nil && kind == v1alpha1.KindDaemonSet {
			t.updated, t.measured = j.Observed.Updated, true
		}
	} else {
		t.Revisions = FromHistory(h, kind)
		t.Unjournaled = old != nil
	}
	if old == nil {
		switch {
		case j == nil:
			if cur := t.Current(); cur != nil && settledIn(h, cur.Template) {
				cur.Finished = at(now)
			}
			return t
		case j.Deleted == nil:
			// The leader has not yet seen the workload of this name go: what it last rolled
			// out is unknown, so it became current now.
			t.Revisions = append(slices.Clip(t.Revisions), Revision{Since: now, Progressed: now, Pending: true})
			return t
		}
		t.Held = j.Held
		return adopted(t, h, flags, now)
	}
	if j != nil && j.Observed != nil && j.UID == old.UID && !j.Held && !old.Rollout.Held {
		if missed := j.missed(h); len(missed) > 0 {
			// kube numbered templates that became current after the journal last looked (a
			// leader that lags two flips sees neither): they became current now.
			t.Revisions = splice(slices.Clone(t.Revisions), missed, shapes(t.Revisions, old.Template, flags), now, true)
			t.Recorded, t.measured = false, false
			if cur := t.Current(); Matches(cur, old.Template, flags) {
				cur.Lagging = true
				if !old.Rollout.InProgress {
					cur.Finished = at(now) // old's status shows it finished
				}
				return t
			}
		}
	}
	cur := t.Current()
	current := cur != nil && Matches(cur, old.Template, flags)
	if current && j != nil && !t.Recorded {
		// The journal has not seen old's generation: the template may have changed and come
		// back since (held again, too), which it would have recorded as a new current
		// revision, unfinished.
		r := Revision{Template: cur.Template, Shape: cur.Shape, Since: now, Progressed: now, Pending: true, Lagging: true}
		if !old.Rollout.InProgress {
			r.Finished = at(now) // old's status shows it finished
		}
		t.Revisions = slices.Clone(t.Revisions)
		t.Current().Until = at(now)
		t.Revisions = append(t.Revisions, r)
		return t
	}
	if current {
		if cur.Finished == nil && !old.Rollout.Held && !old.Rollout.InProgress {
			t.Revisions = slices.Clone(t.Revisions)
			t.Current().Finished = at(now)
		}
		return t
	}
	sum, _ := old.Template.Sum()
	if t.Recorded && old.Rollout.Held {
		// A template staged while held, which the journal has seen: current is what last
		// rolled out, unless the cluster shows pods of a template the journal never recorded.
		var ok bool
		if sum, ok = unrecorded(t.Revisions, h, flags); !ok {
			return t
		}
	}
	t.Revisions = slices.Clip(t.Revisions) // the append below copies
	if cur != nil {
		t.Revisions = slices.Clone(t.Revisions)
		t.Current().Until = at(now)
	}
	r := Revision{Template: sum, Since: now, Progressed: now, Pending: true}
	if !old.Rollout.Held && !old.Rollout.InProgress {
		r.Finished = at(now) // its controller has observed it and its status shows it finished
	}
	t.Revisions = append(t.Revisions, r)
	return t
}

// missed lists the fingerprints of the templates that became current after the journal
// last looked, in that order, as kube numbered them: the numbers above Observed.Revision,
// less those the journal recorded before kube numbered them (the revisions it recorded
// after the one Observed.Template names: the current one when it names none). Nil
// without Observed.
func (j *Journal) missed(h history.History) []string {
	o := j.Observed
	if o == nil || len(j.Revisions) == 0 {
		return nil
	}
	after := h.NumberedAfter(o.Revision)
	if len(after) == 0 {
		return nil
	}
	revs := j.Revisions
	recorded := revs[len(revs)-1:]
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].Template == o.Template {
			recorded = revs[i+1:]
			break
		}
	}
	var out []string
	for _, n := range after {
		sum, ok := n.Revision.Template.Sum()
		if !ok {
			continue
		}
		if len(recorded) > 0 && recorded[0].Template == sum {
			recorded = recorded[1:]
			continue
		}
		recorded = nil
		out = append(out, sum)
	}
	return out
}

// splice appends to revs (not empty) the templates missed, in the order they became
// current, each current from now: when they did is not known, so they count as now, on
// the side of caution (a return among them is a return within any revertWindow). One of
// the shape of the revision before it is a scale of it (I4) and keeps its times; shapeOf
// tells a fingerprint's shape where it is known.
func splice(revs []Revision, missed []string, shapeOf func(string) string, now time.Time, pending bool) []Revision {
	for _, sum := range missed {
		cur := &revs[len(revs)-1]
		shape := shapeOf(sum)
		if shape != "" && shape == cur.Shape && sum != cur.Template {
			cur.Template = sum
			continue
		}
		cur.Until = at(now)
		revs = append(revs, Revision{Template: sum, Shape: shape, Since: now, Progressed: now, Pending: pending})
	}
	return revs
}

// shapes tells the shape of a fingerprint: that of a revision of revs, or of t's own.
func shapes(revs []Revision, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas) func(string) string {
	return func(sum string) string {
		if own, ok := t.Sum(); ok && own == sum && len(flags) > 0 {
			shape, _ := t.Shape(flags)
			return shape
		}
		for i := len(revs) - 1; i >= 0; i-- {
			if revs[i].Template == sum {
				return revs[i].Shape
			}
		}
		return ""
	}
}

// unknownSince is a timeline told by the cluster's history h whose current revision, when
// its rollout is unfinished or held, or when it was rolled back to, is taken to have become
// current, and last progressed, now: the history cannot say when a rollback to it
// happened, so a journal rebuilt mid-rollout or after a rollback never lets a fix or a new
// revision through sooner than the lost one would have. A finished rollout to a revision
// created for it keeps the history's times, so that installing holdfast (or a policy) does
// not hold every workload for minInterval; only the rolled-back ones wait once. (Decisions
// without any journal read the history as it is, so that a stalled rollout can be fixed
// while there is no leader to write journals.)
func unknownSince(revs []Revision, h history.History, unfinished bool, now time.Time) []Revision {
	if n := len(revs); n > 0 && (unfinished || rolledBack(&revs[n-1], h)) {
		revs[n-1].Since, revs[n-1].Progressed = now, now
		if n > 1 {
			revs[n-2].Until = at(now)
		}
	}
	return revs
}

// rolledBack is whether the revision cur, as FromHistory tells it, became current by a
// rollback: kube renumbered it above a revision created after it.
func rolledBack(cur *Revision, h history.History) bool {
	for i := range h.Revisions {
		if sum, ok := h.Revisions[i].Template.Sum(); ok && sum == cur.Template {
			return cur.Since.After(h.Revisions[i].Created)
		}
	}
	return false
}

// adopted is the timeline of a created workload, which adopts what an orphaning delete
// left behind (h, history.ReadAdoptable): if the newest of those revisions with pods is
// one the journal has not recorded, it became current now and has not finished.
func adopted(t Timeline, h history.History, flags []v1alpha1.ArgMatchesReplicas, now time.Time) Timeline {
	sum, ok := unrecorded(t.Revisions, h, flags)
	if !ok {
		return t
	}
	t.Revisions = slices.Clone(t.Revisions)
	if cur := t.Current(); cur != nil {
		cur.Until = at(now)
	}
	t.Revisions = append(t.Revisions, Revision{Template: sum, Since: now, Progressed: now, Pending: true})
	return t
}

// renumberedAway is the fingerprint of the newest revision in h that has pods when kube
// numbered it above n, the newest number the journal observed, and it is not cur's
// template (nor one differing only in flags that follow the replicas): the workload rolled
// it out after the journal last looked, though the journal may record it as an earlier
// revision.
func renumberedAway(h history.History, n int64, cur *Revision, flags []v1alpha1.ArgMatchesReplicas) (string, bool) {
	r, sum, ok := newestWithPods(h)
	if !ok || r.Number <= n || sum == cur.Template || Matches(cur, r.Template, flags) {
		return "", false
	}
	return sum, true
}

// newestWithPods is the newest revision in h that has pods, and its fingerprint; false
// when none has, or its template does not fingerprint.
func newestWithPods(h history.History) (*history.Revision, string, bool) {
	for i := len(h.Revisions) - 1; i >= 0; i-- {
		r := &h.Revisions[i]
		if r.Pods == 0 && r.Serving == 0 {
			continue
		}
		sum, ok := r.Template.Sum()
		return r, sum, ok
	}
	return nil, "", false
}

// unrecorded is the fingerprint of the newest revision in h that has pods, when revs do
// not record it: it rolled out after the journal last looked. When revs record it, its
// pods are the current revision's or those the current one replaces.
func unrecorded(revs []Revision, h history.History, flags []v1alpha1.ArgMatchesReplicas) (string, bool) {
	r, sum, ok := newestWithPods(h)
	if !ok || slices.ContainsFunc(revs, func(e Revision) bool { return e.Template == sum || Matches(&e, r.Template, flags) }) {
		return "", false // recorded, or one differing only in flags that follow the replicas (I4)
	}
	return sum, true
}

// settledIn is whether every pod of the history runs the template with fingerprint sum and
// is available: a rollout to it has finished.
func settledIn(h history.History, sum string) bool {
	for _, r := range h.Revisions {
		if s, _ := r.Template.Sum(); s == sum {
			if r.Pods == 0 || r.Serving < r.Pods {
				return false
			}
		} else if r.Pods > 0 {
			return false
		}
	}
	return true
}

// Matches is whether the template is the revision's, or differs from it only in the
// argsMatchReplicas flags (a scale, I4).
func Matches(r *Revision, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas) bool {
	if t.SumIs(r.Template) {
		return true
	}
	if r.Shape == "" || len(flags) == 0 {
		return false
	}
	shape, err := t.Shape(flags)
	return err == nil && shape == r.Shape
}

// FromHistory is the timeline the cluster's history tells: each revision became current
// when History.Current says (a lower bound for one rolled back to), and the newest one's
// rollout last progressed at the latest pod activity. Neither says when a rollback that
// left no trace in pods happened: see unknownSince. A StatefulSet or DaemonSet records a
// ControllerRevision for a template staged while held too: its newest revisions without
// pods, while an older one has some, never rolled out.
func FromHistory(h history.History, kind v1alpha1.WorkloadKind) []Revision {
	revs := h.Revisions
	if kind != v1alpha1.KindDeployment && slices.ContainsFunc(revs, func(r history.Revision) bool { return r.Pods > 0 }) {
		for len(revs) > 1 && revs[len(revs)-1].Pods == 0 {
			revs = revs[:len(revs)-1]
		}
	}
	out := make([]Revision, 0, len(revs))
	for i := range revs {
		r := &revs[i]
		sum, ok := r.Template.Sum()
		if !ok {
			continue
		}
		since := h.Current(r)
		if n := len(out); n > 0 {
			out[n-1].Until = at(since)
		}
		out = append(out, Revision{Template: sum, Since: since, Available: r.Serving, Progressed: since})
	}
	if n := len(out); n > 0 && h.LastActivity.After(out[n-1].Progressed) {
		out[n-1].Progressed = h.LastActivity
	}
	return out
}

// Observe is the journal after the leader observed the workload w (live, from the
// cache) with its history h: a template w rolls out that is not the current one becomes
// current now, unless it differs only in flags (a scale); so do the templates kube
// numbered in between (missed); a rollout w's status shows finished is finished for good;
// more available pods of the current revision (of a DaemonSet, on the nodes that needed
// the rollout when it began), or a lifted hold, restart its stall clock. flags are the
// argsMatchReplicas flags of the policies that select w. j may be nil: the journal then
// starts from the cluster's history.
func Observe(j *Journal, w *workload.Workload, h history.History, flags []v1alpha1.ArgMatchesReplicas, now time.Time) *Journal {
	next := &Journal{}
	// numbered: j's Observed is of this workload, so that numbers above it are changes j
	// may not have recorded; retired or not (kube numbered the changes made while the
	// workload was outside every selection as well).
	numbered := false
	if j != nil {
		*next = *j
		next.Revisions = slices.Clone(j.Revisions)
		numbered = j.Observed != nil && j.UID == w.UID && len(j.Revisions) > 0
		if !numbered {
			next.Observed = nil
		}
		if cur := next.Current(); j.Deleted != nil && j.UID != w.UID && cur != nil && cur.Finished == nil && cur.Available == 0 {
			// Re-created over a rollout the deleted workload had not made one pod available
			// of (its controller may not have acted on it at all): it rolls out from now, as
			// the new workload's controller adopts and acts (minInterval, stallAfter).
			cur.Since, cur.Progressed = now, now
			if n := len(next.Revisions); n > 1 {
				next.Revisions[n-2].Until = at(now)
			}
		}
		if cur := next.Current(); j.Deleted != nil && j.UID == w.UID && cur != nil && cur.Finished == nil {
			// Retired while the workload was not guarded, and guarded again: nothing kept the
			// journal up to date meanwhile (the rollout may have finished and lost a pod
			// since), so its stall clock starts now, as a journal started from the history
			// does (unknownSince).
			cur.Progressed = now
		}
	} else {
		next.Revisions = unknownSince(FromHistory(h, w.Kind), h, w.Rollout.Held || w.Rollout.InProgress, now)
	}
	next.Kind, next.Namespace, next.Name = w.Kind, w.Namespace, w.Name
	next.UID, next.Generation, next.Deleted = w.UID, w.Generation, nil
	next.MinReadySeconds = max(w.Strategy.MinReadySeconds, 0)
	defer next.trim()
	sum, ok := w.Template.Sum()
	if !ok {
		return next
	}
	var shape string
	if len(flags) > 0 {
		shape, _ = w.Template.Shape(flags)
	}
	cur := next.Current()
	if w.Rollout.Held {
		next.Held = true
		// A template staged while held is not current, unless it rolled out to some pods
		// before the hold (the controller may act between two observations).
		rolled, ok := unrecorded(next.Revisions, h, flags)
		if !ok && j != nil && j.Deleted != nil && j.Observed != nil && cur != nil && cur.Template == sum {
			// Retired, and held again with its current template staged: one it records as an
			// earlier revision was rolled out again while it did not look (outside the
			// selection), which kube numbered anew. Not of a journal that kept looking: a
			// held workload's template set back (a paused rollback) is numbered anew too,
			// and is no rollout of it.
			rolled, ok = renumberedAway(h, j.Observed.Revision, cur, flags)
		}
		if ok {
			if cur != nil {
				cur.Until = at(now)
			}
			r := Revision{Template: rolled, Since: now, Progressed: now}
			if rolled == sum {
				r.Shape = shape
			}
			next.Revisions = append(next.Revisions, r)
		}
		// A staged template that is current has pods kube creates while held (a held
		// StatefulSet grown over it): their coming up is progress, which the fleet limit
		// reads (a staged start holds its slot while its pods come up). Lifting the hold
		// restarts the stall clock anyway.
		if cur := next.Current(); cur != nil && cur.Template == sum {
			if r := h.Find(w.Template); r != nil && r.Serving > cur.Available {
				cur.Available, cur.Progressed = r.Serving, now
			}
		}
		// Numbers kube gave staged templates are no change of the current one.
		nodes := next.Observed.nodesSeen()
		next.observe(h, sum, next.Observed.updated())
		next.Observed.Nodes = nodes
		next.lineage(j, w, h, sum, now)
		return next
	}
	// fresh: the current revision became current in this observation.
	fresh := false
	if numbered && newestIs(h, sum) {
		if missed := j.missed(h); len(missed) > 0 {
			next.Revisions = splice(next.Revisions, missed, shapes(next.Revisions, w.Template, flags), now, false)
			cur, fresh = next.Current(), true
		}
	}
	switch {
	case cur != nil && cur.Template == sum:
		cur.Shape = shape
		if own, ok := RenumberedSince(j, h, w.Template, flags); ok && !numbered && j.Deleted != nil {
			// Retired while the workload was outside every selection, it left this template
			// and came back to it meanwhile (kube numbered it anew above what j observed):
			// record the detour, and the return as becoming current now, as the entry that
			// brought it in was judged (checkEnteredChange). When it happened is not known;
			// kept as j dated it, the rate rules would run from the retired record.
			// The detour began after j last looked, which is when j was retired. cur points
			// into next.Revisions: written before the appends.
			left := now
			missed := detour(h, own, j.Observed.Revision)
			detoured := missed != "" && missed != sum
			if detoured {
				left = earliest(latest(cur.Since, *j.Deleted), now)
			}
			cur.Until = at(left)
			if detoured {
				next.Revisions = append(next.Revisions, Revision{Template: missed, Since: left, Until: at(now), Progressed: left})
			}
			next.Revisions = append(next.Revisions, Revision{Template: sum, Shape: shape, Since: now, Progressed: now})
			cur, fresh = next.Current(), true
		} else if missed, since, ok := missedReturn(h, cur, w.Template); ok && !numbered {
			// Between two observations the workload left this template and came back: the
			// controller created a revision after it became current and renumbered it above
			// that one. Record the detour, and the return as becoming current now. (A
			// numbered journal has seen it above.)
			cur.Until = at(since)
			next.Revisions = append(next.Revisions, Revision{Template: missed, Since: since, Until: at(now), Progressed: since},
				Revision{Template: sum, Shape: shape, Since: now, Progressed: now})
			cur, fresh = next.Current(), true
		}
	case cur != nil && cur.Shape != "" && cur.Shape == shape:
		cur.Template = sum // a scale keeps the revision's times (I4)
	default:
		if cur != nil {
			cur.Until = at(now)
		}
		next.Revisions = append(next.Revisions, Revision{Template: sum, Shape: shape, Since: now, Progressed: now})
		cur, fresh = next.Current(), true
	}
	if next.Held {
		next.Held, cur.Progressed = false, now
	}
	if p := w.Rollout.Progress; cur.Finished != nil && !fresh && w.Kind == v1alpha1.KindStatefulSet && j != nil &&
		(j.UID != w.UID || w.Generation > j.Generation) && p.Updated < p.Target && p.Total > p.Updated {
		// Finished is sticky through pod churn, not through a spec change that leaves
		// ordinals to update while pods of another revision remain: a partition lowered
		// below a canary's old ordinals (before or after its controller acted, whose status
		// counts them) starts that rollout again (the fleet limit counts it, settle waits),
		// and it finishes again once the status says so. A scale up, whose new ordinals
		// are all of the template, leaves no pod of another revision.
		cur.Finished, cur.Progressed = nil, now
	}
	if cur.Finished == nil && !w.Rollout.InProgress {
		cur.Finished = at(now)
	}
	// A DaemonSet's Updated, when j measured it, is of this revision unless it is fresh.
	measured := numbered && !fresh && w.Kind == v1alpha1.KindDaemonSet
	var updated, nodes int32
	if measured {
		updated, nodes = j.Observed.Updated, j.Observed.Nodes
	}
	if r := h.Find(w.Template); r != nil {
		progressed := r.Serving > cur.Available
		cur.Available = max(cur.Available, r.Serving)
		if w.Kind == v1alpha1.KindDaemonSet {
			// The pods of nodes that joined after the rollout began are created on its
			// template: the cluster grew, the rollout did not progress.
			u := r.ServingBefore(cur.Since)
			if n, ok := h.NodesBefore(cur.Since); ok {
				if measured && nodes > 0 && n < nodes {
					// Nodes that needed the rollout left: the pods they served are gone, not
					// undone, and what the others serve is the mark to pass (never a mark
					// the nodes left cannot reach again, which would read a healthy rollout
					// as stalled). Their leaving is no progress either.
					updated = min(updated, u)
				}
				nodes = n
			}

			if measured {
				progressed = u > updated
			}
			updated = max(updated, u)
		}
		if progressed {
			cur.Progressed = now
		}
	}
	next.observe(h, sum, updated)
	if w.Kind == v1alpha1.KindDaemonSet {
		next.Observed.Nodes = nodes
	}
	next.lineage(j, w, h, sum, now)
	return next
}

// Settling is whether the leader's observation of w at now needs the pods w's selector
// matches (history.History.ReadSelected): the journal j is of a workload of w's name that
// the leader saw gone, which w was created in place of, or it records one and w has not
// settled since (Observed.Replaced), while a start of that one may still count.
func Settling(j *Journal, w *workload.Workload, now time.Time) bool {
	switch {
	case j == nil:
		return false
	case j.UID != w.UID:
		return j.Deleted != nil && j.UID != ""
	default:
		o := j.Observed
		return o != nil && o.Previous != "" && !o.Settled && !lineageLapsed(o, now)
	}
}

// lineageLapsed is whether every start of the object o records as replaced has lapsed
// (budget.StartLapse, read with another replica's clock margin): they were all admitted
// before the leader saw it replaced.
func lineageLapsed(o *Observed, now time.Time) bool {
	return now.Sub(o.PreviousSince) >= budget.StartLapse+budget.MaxClockSkew
}

// lineage records in next, the journal j after the leader observed w with history h, the
// workload w was created in place of and, once, that w settled since (Observed.Replaced).
// Replaced is j's object only once the leader saw it gone (Deleted): a leader whose
// workload cache lags the journals (a failover) may observe the older object over the
// newer one's journal, and must not take the newer one for replaced. Settled is read in
// kube's terms: its controller acted on its spec, every pod it wants runs sum, and no
// other pod its selector matches is live (h.Selected: orphans it may still adopt, as
// kube's controllers do once their caches show them orphaned, and pods of the deleted
// workload still terminating count until gone).
func (next *Journal) lineage(j *Journal, w *workload.Workload, h history.History, sum string, now time.Time) {
	o := next.Observed
	if o == nil || j == nil {
		return
	}
	switch {
	case j.UID != w.UID:
		o.Previous, o.PreviousSince, o.Settled = "", time.Time{}, false
		if j.Deleted != nil {
			o.Previous, o.PreviousSince = j.UID, now
		}
	case j.Observed != nil:
		o.Previous, o.PreviousSince, o.Settled = j.Observed.Previous, j.Observed.PreviousSince, j.Observed.Settled
	}
	if o.Previous != "" && lineageLapsed(o, now) {
		// Every start of the replaced object has lapsed: nothing reads the lineage now.
		o.Previous, o.PreviousSince, o.Settled = "", time.Time{}, false
	}
	if o.Previous == "" || o.Settled {
		return
	}
	r, p := &w.Rollout, w.Rollout.Progress
	o.Settled = !r.InProgress && !r.Mixed && !r.Held && !h.LiveBesides(sum) &&
		p.Updated == p.Want && h.SelectedRead && h.Selected == p.Want
}

// observe records in Observed the newest revision number h shows when it numbers the
// template sum the workload has (the leader's caches agree), and updated.
func (j *Journal) observe(h history.History, sum string, updated int32) {
	o := Observed{Updated: updated}
	if j.Observed != nil {
		o.Revision, o.Template = j.Observed.Revision, j.Observed.Template
	}
	if n := h.Newest(); n != nil && (j.Observed == nil || newestIs(h, sum)) {
		o.Revision = n.Number
		o.Template, _ = n.Template.Sum()
	}
	j.Observed = &o
}

func (o *Observed) updated() int32 {
	if o == nil {
		return 0
	}
	return o.Updated
}

func (o *Observed) nodesSeen() int32 {
	if o == nil {
		return 0
	}
	return o.Nodes
}

// newestIs is whether the newest revision h shows is of the template sum.
func newestIs(h history.History, sum string) bool {
	n := h.Newest()
	if n == nil {
		return false
	}
	s, ok := n.Template.Sum()
	return ok && s == sum
}

// missedReturn finds a revision the journal never recorded between the current one's
// start and now: created after the current revision became current, and numbered before
// it, which kube does when a workload goes back to a template it had.
func missedReturn(h history.History, cur *Revision, t *workload.Template) (string, time.Time, bool) {
	back := h.Find(t)
	if back == nil {
		return "", time.Time{}, false
	}
	for i := len(h.Revisions) - 1; i >= 0; i-- {
		r := &h.Revisions[i]
		if r.Name == back.Name || r.Number >= back.Number || !r.Created.After(cur.Since) {
			continue
		}
		if sum, ok := r.Template.Sum(); ok {
			return sum, r.Created, true
		}
	}
	return "", time.Time{}, false
}

// RenumberedSince reports that kube numbered the template t, the journal's current one,
// above the newest number the journal observed, and returns t's revision: the workload
// became current again after the journal last looked, so it left it and came back,
// though the revisions in between may be gone (revisionHistoryLimit) and its own made
// anew. The numbers are read whatever workload of the name j observed: one re-created
// over the ReplicaSets or revisions of its name adopts them with their numbers, and one
// that made its own numbers them from 1.
//
// A number above the journal's that only scales account for is no return: each number in
// between names a revision of t's shape under flags (a flag-following scale makes a
// revision, I4), or none is in between (kube numbers anew a current ReplicaSet or
// ControllerRevision that was deleted). A number in between that no revision has any
// more may have been another template's: read as a return.
func RenumberedSince(j *Journal, h history.History, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas) (*history.Revision, bool) {
	own := h.Find(t)
	if own == nil || j == nil || j.Observed == nil || own.Number <= j.Observed.Revision || ScaledOnly(h, own, j.Observed.Revision, t, flags) {
		return nil, false
	}
	return own, true
}

// ScaledOnly reports whether every number kube gave after n and before own's names a
// revision of t's shape under flags, or own itself (renumbered since): no other template
// became current in between.
func ScaledOnly(h history.History, own *history.Revision, n int64, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas) bool {
	byNumber := map[int64]*history.Revision{}
	for _, k := range h.NumberedAfter(n) {
		byNumber[k.Number] = k.Revision
	}
	shape := ""
	if len(flags) > 0 {
		shape, _ = t.Shape(flags)
	}
	for k := n + 1; k < own.Number; k++ {
		r, ok := byNumber[k]
		if !ok {
			return false // gone: it may have been another template
		}
		if r == own {
			continue
		}
		if s, err := r.Template.Shape(flags); shape == "" || err != nil || s != shape {
			return false
		}
	}
	return true
}

// detour is the revision of another template than own that kube numbered last after n and
// before own: the one the workload left own for, before it came back; "" when none is
// left (pruned by revisionHistoryLimit).
func detour(h history.History, own *history.Revision, n int64) string {
	out := ""
	for _, k := range h.NumberedAfter(n) {
		if k.Number >= own.Number {
			break
		}
		if k.Revision == own {
			continue
		}
		if sum, ok := k.Revision.Template.Sum(); ok {
			out = sum
		}
	}
	return out
}

// Retention is how long a deleted workload's journal is kept: as long as any policy's
// rules look back (revertWindow, minInterval, stallAfter) or its windows last, so that a
// delete and re-create finds it.
func Retention(policies []v1alpha1.RolloutPolicy) time.Duration {
	var keep time.Duration
	for i := range policies {
		r := &policies[i].Spec.Rules
		for _, d := range []*time.Duration{durationOf(r.RevertWindow), durationOf(r.MinInterval)} {
			if d != nil {
				keep = max(keep, *d)
			}
		}
		if r.Settle != nil {
			keep = max(keep, StallAfter(r.Settle))
		}
		// A workload re-created outside the selection during a window is judged against
		// its journal when it returns (checkEnteredChange): keep it as long as one lasts.
		for _, w := range policies[i].Spec.Windows {
			keep = max(keep, w.Duration.Duration)
		}
	}
	return keep
}

// DefaultStallAfter is settle.stallAfter's default, as the CRD sets it.
const DefaultStallAfter = 10 * time.Minute

// StallAfter is how long a rollout under s goes without progress before it counts as
// stalled; a nil rule has the default.
func StallAfter(s *v1alpha1.SettleRule) time.Duration {
	if s != nil && s.StallAfter != nil {
		return s.StallAfter.Duration
	}
	return DefaultStallAfter
}

func at(t time.Time) *time.Time { return &t }

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func durationOf(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	return &d.Duration
}
