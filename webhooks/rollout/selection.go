package rollout

import (
	"fmt"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// entersSelection is an UPDATE whose labels bring the workload into the selection of a
// policy in force that did not select it: the workload is judged on what it brings
// (checkEntering), so its history is read.
func entersSelection(in Input) bool {
	if in.Operation != admissionv1.Update || in.Old == nil {
		return false
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		if p.Spec.Suspend {
			continue
		}
		if selectsNew, selectedOld, err := selection(p, in); err == nil && selectsNew && !selectedOld {
			return true
		}
	}
	return false
}

// checkEntering judges a workload its labels bring into a policy's selection on what it
// brings, in kube's terms: a rollout its controller has not finished (not observed, not
// every pod updated and available, pods left on another template) or pods of more than one
// template. Otherwise a tenant walks around every rule: orphan the workload, re-create it
// outside the selection with a new template (no guard is asked), and relabel it back in
// while both templates run. A workload with one template and a finished rollout enters
// freely; its next change is judged by the policy.
func checkEntering(in Input) []finding {
	live := liveRevisions(in.History)
	r := in.Old.Rollout
	unfinished := r.Progress.Unobserved > 0 || r.Progress.Updated < r.Progress.Target || r.Mixed
	if len(live) <= 1 && !unfinished {
		return nil // pods not yet Ready on its one template are no rollout
	}
	what := fmt.Sprintf("its rollout is not finished (%s)", r.Progress)
	if len(live) > 1 {
		what = fmt.Sprintf("%d pod templates have live pods", len(live))
	}
	return []finding{{rule: RuleSelection, field: field.NewPath("metadata", "labels"), message: fmt.Sprintf(
		"%s: the update brings the workload into the policy's selection while %s; let the rollout finish or roll it "+
			"back to one template with all pods updated, then relabel it (or relabel it as an exempt requester)%s",
		in.New, what, terminatingNote)}}
}

// checkEnteredChangeName names checkEnteredChange among the checks (a mutant of the
// mutation test removes it).
const checkEnteredChangeName = "selection/enteredChange"

// checkEnteredChange judges a workload that enters a policy's selection with a template
// other than the one the journal of its name last recorded as current, or with that one
// after the cluster's history shows it left it and came back: the change was made outside
// the selection (orphaned, re-created unselected with a new template, rolled out,
// relabelled back in), and its entry counts as making it now. So the policy's rate rules
// hold across the walk: the entry waits out minInterval from the newest revision it
// follows, a return to a template it replaced within revertWindow is flapping, and the
// policy's windows hold it. The journal is read whether or not the leader has retired it
// (a delete retires it, and it is kept for journal.Retention so that a re-create finds
// it); what it did not record is read from kube's revisions (outsideSince), dated where
// they are fixed, so that the wait ends.
func checkEnteredChange(in Input, spec *v1alpha1.RolloutPolicySpec) []finding {
	cur := in.Journal.Current()
	target, ok := in.New.Template.Sum()
	if !ok {
		return nil
	}
	flags := flagsOf(in)
	if cur == nil || cur.Template == "" {
		return checkUnjournaledEntry(in, spec, flags)
	}
	out := outsideSince(in.History, in.New.Template, flags, cur.Since)
	changed := !journal.Matches(cur, in.New.Template, flags)
	if !changed && !out.was {
		at, ok := renumberedSince(in.Journal, in.History, in.New.Template, flags)
		if !ok {
			return nil
		}
		out.left, out.was = at, true
		if at.After(out.newest) {
			out.newest = at
		}
	}
	newest := cur.Since
	if out.newest.After(newest) {
		newest = out.newest
	}
	recorded := fmt.Sprintf("%s: the update brings the workload into the policy's selection with a pod template other than "+
		"the revision %s the policy last saw become current %s ago; the change was made outside the selection and its entry counts as making it now",
		in.New, shortSum(cur.Template), round(in.Now.Sub(cur.Since)))
	if !changed {
		recorded = fmt.Sprintf("%s: the update brings the workload into the policy's selection with the revision %s, which it "+
			"left outside the selection %s ago and came back to; the return was made outside the selection and its entry counts as making it now",
			in.New, shortSum(cur.Template), round(in.Now.Sub(out.left)))
	}
	if changed && out.everWas {
		// A template the journal never recorded (current for less than the leader's lag
		// before the workload left, or across a re-create) that the workload comes back to:
		// kube's revisions tell it left it for one that became current after its own was
		// made, though the journal dated that one later than kube did (History.Current).
		// everLeft is never before left: it is the latest over more revisions.
		out.left, out.was = out.everLeft, true
	}
	if changed && spec.Rules.RevertWindow != nil {
		t := journal.Timeline{Revisions: in.Journal.Revisions}
		l, w := t.LeftAt(target, "")
		if !w && len(flags) > 0 {
			// A template that differs from an earlier one only in the flags that follow
			// spec.replicas is a return to it, as checkRevision judges an edit.
			if shape, err := in.New.Template.Shape(flags); err == nil {
				l, w = t.LeftAt(target, shape)
			}
		}
		if w && (!out.was || l.After(out.left)) {
			out.left, out.was = l, true
		}
	}
	return entryFindings(in.Now, spec, recorded, newest, out)
}

// checkUnjournaledEntry judges an entry no journal of the name records: none was kept (a
// workload no policy ever selected), or the leader dropped a retired one journal.Retention
// after the workload left. kube's revisions tell what changed within the policy's own
// lookback (as long as its rules and windows look back, journal.Retention): a template
// that became current in it, after another, counts as made now, as with a journal; one
// that came back to a template it left in it is a return. A workload whose templates all
// became current before that enters as ever: no rule of the policy could read its change.
func checkUnjournaledEntry(in Input, spec *v1alpha1.RolloutPolicySpec, flags []v1alpha1.ArgMatchesReplicas) []finding {
	from := in.Now.Add(-journal.Retention([]v1alpha1.RolloutPolicy{{Spec: *spec}}))
	out := outsideSince(in.History, in.New.Template, flags, from)
	current, followed, ok := followedFrom(in.History, in.New.Template, flags)
	changed := ok && current.After(from)
	if out.newest.IsZero() && !changed {
		return nil
	}
	newest := out.newest
	if changed && followed.After(newest) {
		newest = followed
	}
	recorded := fmt.Sprintf("%s: the update brings the workload into the policy's selection with a pod template that became current outside it "+
		"%s ago, after another, which no revision journal recorded; its entry counts as making the change now", in.New, round(in.Now.Sub(current)))
	if out.was {
		recorded = fmt.Sprintf("%s: the update brings the workload into the policy's selection with a pod template it left outside the selection "+
			"%s ago and came back to, which no revision journal recorded; the return counts as made now", in.New, round(in.Now.Sub(out.left)))
	}
	return entryFindings(in.Now, spec, recorded, newest, out)
}

// followedFrom is when t's revision became current (History.Current) and the latest start
// before it of another template (not of t's shape under flags): the one it followed, zero
// when that revision is gone (revisionHistoryLimit) though t's number tells it followed
// one (a number above 1, or one it had before, that scales alone do not account for,
// journal.ScaledOnly). ok is false when t has no revision or followed none.
func followedFrom(h history.History, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas) (current, followed time.Time, ok bool) {
	own := h.Find(t)
	if own == nil {
		return time.Time{}, time.Time{}, false
	}
	current = h.Current(own)
	ok = (own.Number > 1 || len(own.Renumbered) > 0) && !journal.ScaledOnly(h, own, 0, t, flags)
	otherTemplates(h, t, flags, func(_ *history.Revision, start time.Time) {
		if start.Before(current) && start.After(followed) {
			followed, ok = start, true
		}
	})
	return current, followed, ok
}

// entryFindings are the policy's rate rules and windows on an entry that counts as
// making a change now: a return (out.was) to a template left at out.left within
// revertWindow, a change within minInterval of newest (the latest start of a template it
// follows), a window holding new rollouts.
func entryFindings(now time.Time, spec *v1alpha1.RolloutPolicySpec, recorded string, newest time.Time, out outside) []finding {
	path := field.NewPath("metadata", "labels")
	var found []finding
	if r := spec.Rules.RevertWindow; r != nil && out.was && now.Sub(out.left) < r.Duration {
		found = append(found, finding{rule: RuleRevertWindow, field: path, message: fmt.Sprintf(
			"%s, a return to the template it replaced within %s (flapping); relabel it after %s, or go forward with a new pod template",
			recorded, r.Duration, round(r.Duration-now.Sub(out.left)))})
	}
	since := now.Sub(newest)
	if r := spec.Rules.MinInterval; r != nil && len(found) == 0 && since < r.Duration {
		found = append(found, finding{rule: RuleMinInterval, field: path, message: fmt.Sprintf(
			"%s, less than the minimum interval of %s between revisions; relabel it after %s", recorded, r.Duration, round(r.Duration-since))})
	}
	if len(spec.Windows) > 0 {
		ws, _ := policy.ParseWindows(spec.Windows)
		if h := ws.At(now); h.Held {
			found = append(found, finding{rule: RuleWindow, field: path, message: fmt.Sprintf(
				"%s, and new rollouts are held by the window %q; relabel it after %s (in %s)",
				recorded, h.Window, h.Until.UTC().Format(time.RFC3339), round(h.Until.Sub(now)))})
		}
	}
	return found
}

// renumberedSince is journal.RenumberedSince dated: at is the latest time the return
// can be dated by that does not move: its revision's start (History.Current), the
// journal's retirement (the leader saw it leave before it changed) or its pods' last
// activity, whichever is latest.
func renumberedSince(j *journal.Journal, h history.History, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas) (at time.Time, ok bool) {
	own, ok := journal.RenumberedSince(j, h, t, flags)
	if !ok {
		return time.Time{}, false
	}
	at = h.Current(own)
	if j.Deleted != nil && j.Deleted.After(at) {
		at = *j.Deleted
	}
	if h.LastActivity.After(at) {
		at = h.LastActivity
	}
	return at, true
}

// between reports whether kube numbered r between two numbers own had: r was current
// after own was, and own became current again after it (A → B → A → B: A numbered 3
// between B's 2 and 4), whatever the creation times tell.
func between(r, own *history.Revision) bool {
	return slices.ContainsFunc(own.Renumbered, func(m int64) bool {
		in := func(k int64) bool { return m < k && k < own.Number }
		return in(r.Number) || slices.ContainsFunc(r.Renumbered, in)
	})
}

// outside is what kube's revisions tell of a workload's templates after its journal last
// recorded one becoming current (outsideSince).
type outside struct {
	// newest is the latest start of a template other than the entering one (zero: none).
	newest time.Time
	// left is, when was, the latest time the entering template can have stopped being
	// current: the start of another template after its own revision was created.
	left time.Time
	was  bool
	// everLeft and everWas are left and was over every revision kube keeps, whenever it
	// became current.
	everLeft time.Time
	everWas  bool
}

// outsideSince reads from kube's revisions the templates that became current after since
// (when the journal's current revision did), other than t and those of its shape under
// flags (a scale is no revision, I4). A revision's start is History.Current: its creation,
// or for one kube renumbered on a return, the latest creation numbered before it (a lower
// bound). The entering template was left no later than the newest such start after its
// own revision was created, an upper bound, which stays fixed as time passes.
func outsideSince(h history.History, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas, since time.Time) outside {
	var o outside
	own := h.Find(t)
	otherTemplates(h, t, flags, func(r *history.Revision, start time.Time) {
		leftOwn := own != nil && (start.After(own.Created) || between(r, own))
		if leftOwn && (!o.everWas || start.After(o.everLeft)) {
			o.everLeft, o.everWas = start, true
		}
		if !start.After(since) {
			return
		}
		if start.After(o.newest) {
			o.newest = start
		}
		if leftOwn && (!o.was || start.After(o.left)) {
			o.left, o.was = start, true
		}
	})
	return o
}

// otherTemplates calls f with each of h's revisions but t's own and those of t's shape
// under flags (a scale is no revision, I4), and when it became current (History.Current).
func otherTemplates(h history.History, t *workload.Template, flags []v1alpha1.ArgMatchesReplicas, f func(r *history.Revision, start time.Time)) {
	own := h.Find(t)
	var shape string
	if len(flags) > 0 {
		shape, _ = t.Shape(flags)
	}
	for i := range h.Revisions {
		r := &h.Revisions[i]
		if own != nil && r.Name == own.Name {
			continue
		}
		if shape != "" {
			if s, err := r.Template.Shape(flags); err == nil && s == shape {
				continue
			}
		}
		f(r, h.Current(r))
	}
}
