package rollout

import (
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// The revision rules decide a request that starts rolling out a template by whether it
// keeps the invariants of docs/invariants.md true:
//   - I1 one rollout at a time (settle): no new revision while the current one's rollout
//     is unfinished, but for a cancel (a return to the revision it replaced, which still
//     has pods) and a fix of a stalled rollout;
//   - I2 rate (minInterval): a template that was not current within revertWindow becomes
//     current no sooner than minInterval after the current one did;
//   - I3 flapping (revertWindow): one return per window, and only while the rollout it
//     cancels is unfinished or stalled;
//   - I4: a scale (only argsMatchReplicas flags follow spec.replicas) starts nothing.
// "Became current" and "finished" come from the revision journal (journal.View).

// MayStart is whether the request may start rolling out a template, so that the revision
// rules read the workload's journal and history: an UPDATE after which the workload's
// controller rolls (it is not held) that changes the template or lifts a hold (resume,
// OnDelete to RollingUpdate, a partition lowered below the replicas), or a CREATE, which
// adopts what a deleted workload of its name left behind.
func MayStart(in Input) bool {
	if in.New == nil || in.New.Rollout.Held {
		return false
	}
	switch in.Operation {
	case admissionv1.Create:
		return true
	case admissionv1.Update:
		return in.Old != nil && (in.TemplateChanged || in.Old.Rollout.Held || lowersPartition(in))
	}
	return false
}

// startsNow is a request after which kube creates pods of a template that has none:
// MayStart, or a held StatefulSet grown over its staged template (startsStaged). The fleet
// limit and the shared budget judge both, and the handler reads their ledgers for both.
func startsNow(in Input) bool { return MayStart(in) || startsStaged(in) }

// liftsHold is an UPDATE that lifts a hold (resumes, switches from OnDelete, lowers a
// partition): a scale that does too is judged as what it rolls out, since the held
// template's pods start now, whatever its flags (I4 does not make it a non-start).
func liftsHold(in Input) bool {
	return in.Operation == admissionv1.Update && in.Old != nil && (in.Old.Rollout.Held || lowersPartition(in))
}

// lowersPartition is an UPDATE that lowers a StatefulSet's partition below ordinals that do
// not run its update revision yet: kube then replaces them, one after another, so the
// rollout that was finished under the partition starts again: the partition falls below
// ordinals that remain (a scale down in the same request included) while pods of another
// revision run. A scale up raises the target too, with the partition where it was: its
// new ordinals replace nothing.
func lowersPartition(in Input) bool {
	if in.Old == nil || in.New.Kind != v1alpha1.KindStatefulSet {
		return false
	}
	was, now := in.Old.Rollout.Progress, in.New.Rollout.Progress
	// The partition is Want-Target (at least that much once it reaches the replicas).
	before, after := was.Want-was.Target, now.Want-now.Target
	return after < min(before, now.Want) && (in.Old.Rollout.Mixed || was.Updated < now.Target)
}

// revisionState is what a request does to the workload's revisions, the same for every
// policy.
type revisionState struct {
	// resumes is an UPDATE that lifts a hold off an unfinished rollout or lowers a
	// partition (Decide): not a start of a new revision, but kube creates pods for it now.
	resumes bool
	// start is a request that makes a template other than the current one roll out.
	start    bool
	timeline journal.Timeline
	current  *journal.Revision
	// target is the fingerprint of the template the request rolls out.
	target string
	// cancel is a return to the revision the current one replaced, while the current one's
	// rollout is unfinished and the returned-to revision still has pods.
	cancel bool
	// firstPods is a request that is no start by the journal (it dates the template
	// current already) yet gives it its first pods: a hold lifted off it, or a held
	// StatefulSet grown over it or a pod of it replaced (startsStaged), when no pod of it
	// has run: the journal saw none available and its rollout never finished, and neither
	// the status nor the cache shows one (firstPodsOf). A re-create of a workload whose
	// pods are all gone restores a revision that ran. Decide holds it to minInterval and
	// the windows.
	firstPods bool
	// flags are the argsMatchReplicas flags of the policies that select the workload.
	flags []v1alpha1.ArgMatchesReplicas
	// scale is an UPDATE whose only template difference is flags following spec.replicas.
	scale bool
}

func revisionsOf(in Input, flags []v1alpha1.ArgMatchesReplicas, scale bool) revisionState {
	rs := revisionState{flags: flags, scale: scale}
	if scale {
		return rs // I4: a scale starts no revision
	}
	rs.timeline = journal.View(in.Journal, in.New.Kind, in.Old, in.History, flags, in.Now)
	rs.current = rs.timeline.Current()
	target, ok := in.New.Template.Sum()
	if rs.current == nil || !ok {
		// Nothing is known to compare with (a first CREATE), or a template that does not
		// decode, which the API server's validation refuses.
		return rs
	}
	rs.target = target
	// A template of the current one's shape is the same revision (a scale, I4); unless the
	// old object is the current revision, when only isScale tells a scale from a flag change.
	same := rs.current.Template == target
	if prev := rs.timeline.Previous(); !same && in.Old == nil && rs.current.Pending && prev != nil && keepsTwo(in) {
		// Re-created before the leader saw the delete (the current revision is unknown), or
		// over pods of a revision the journal has not recorded as itself (one it recorded
		// under a policy whose argsMatchReplicas flags made it a scale, since changed): the
		// template the journal last recorded is the template the deleted workload had, and
		// re-creating it with that template continues what was admitted. Unless it would be
		// a third template with live pods (I7).
		same = prev.Template == target || journal.Matches(prev, in.New.Template, flags)
	}
	if !same && (in.Old == nil || !journal.Matches(rs.current, in.Old.Template, nil)) {
		same = journal.Matches(rs.current, in.New.Template, flags)
	}
	// Lifting the hold on a template the journal has not recorded may start it: not known
	// to have rolled out, it is treated as started now. One it recorded as current (and
	// has not caught up with since) is already rolling out or rolled out.
	rs.start = !same || (rs.current.Pending && !rs.current.Lagging && in.Old != nil && in.Old.Rollout.Held)
	if prev := rs.timeline.Previous(); rs.start && rs.current.Finished == nil && prev != nil && prev.Template == target {
		// The cache may still show pods of it that the old object's status says are gone:
		// every pod runs the old object's template, another one.
		gone := in.Old != nil && in.TemplateChanged && !in.Old.Rollout.Mixed
		r := in.History.Find(in.New.Template)
		rs.cancel = r != nil && (r.Serving > 0 || (r.Live > 0 && neverRolled(in, rs.current))) && !gone
	}
	return rs
}

// neverRolled is a current revision that no pod runs, by the cache and by the old
// object's status of its own generation: a template staged on a held workload after it
// became current (a re-create, then OnDelete), or one held before its controller acted.
// Going back to the revision it replaced changes no pod, whether or not that one's pods
// serve (its rollout may be the stuck one): a cancel, else nothing but its stall would
// lead out, and a held rollout never stalls.
func neverRolled(in Input, cur *journal.Revision) bool {
	if in.Old == nil || in.Old.Rollout.Progress.Unobserved != 0 || in.Old.Rollout.Progress.Updated != 0 {
		return false
	}
	return noLivePodsOf(in, in.Old, cur)
}

// noLivePodsOf is whether w's template is cur's and the cache shows no live pod of it
// (a status counts the pods of w's template, not of another).
func noLivePodsOf(in Input, w *workload.Workload, cur *journal.Revision) bool {
	if sum, ok := w.Template.Sum(); !ok || sum != cur.Template {
		return false
	}
	r := in.History.Find(w.Template)
	return r == nil || r.Live == 0
}

// checkFirstPods holds a firstPods request to minInterval: kube makes the current
// revision's first pods now, so it starts now, whenever the journal dated it current. Made
// current by an exempt requester, or re-created held over the pods of the revision before
// it, it was judged by nothing that measured the interval to that revision's first pods;
// the interval is measured from when the last revision of another template became current.
// A return within revertWindow is not held to it, as checkRevision's is not.
func checkFirstPods(in Input, rules *v1alpha1.RolloutRules, rs *revisionState) []finding {
	if rules.MinInterval == nil || !rs.firstPods {
		return nil
	}
	revs := rs.timeline.Revisions
	b := len(revs) - 2
	for b >= 0 && revs[b].Template == rs.current.Template {
		b-- // a copy of the current one the leader has not recorded yet is no other
	}
	if b < 0 {
		return nil
	}
	before := &revs[b]
	// A return: the current template was current before the one before it, and left
	// within revertWindow.
	if earlier := (journal.Timeline{Revisions: revs[:b+1]}); rules.RevertWindow != nil {
		if left, was := earlier.LeftAt(rs.target, ""); was && in.Now.Sub(left) < rules.RevertWindow.Duration {
			return nil
		}
	}
	since := in.Now.Sub(before.Since)
	wait := rules.MinInterval.Duration - since
	if wait <= 0 {
		return nil
	}
	return []finding{{rule: RuleMinInterval, field: templatePath, message: fmt.Sprintf(
		"%s: the change gives its current revision %s its first pods %s after the revision before it became current, "+
			"less than the minimum interval of %s between revisions; retry after %s, or make it as an exempt requester",
		in.New, shortSum(rs.current.Template), round(since), rules.MinInterval.Duration, round(wait))}}
}

// firstPodsOf is whether no pod of cur, the current revision, has run: by the cache, which
// counts the pods a workload adopts, and the old object's status, which counts none
// updated, of its own generation (neverRolled) or of one before it (the change that holds
// the rollout, made before its controller acted on the edit: it made no pod of it either),
// or none yet (created a moment ago, or this CREATE).
func firstPodsOf(in Input, cur *journal.Revision) bool {
	if in.Old == nil {
		return noLivePodsOf(in, in.New, cur)
	}
	return in.Old.Rollout.Progress.Updated == 0 && noLivePodsOf(in, in.Old, cur)
}

// stalled is a current rollout that kube declared stalled, or whose available pods have not
// increased for stallAfter while it could roll: the stall clock runs from the last
// increase or the lifting of the last hold, so pausing a rollout never stalls it. A
// DaemonSet's pods count on the nodes that needed the rollout when it began: a node that
// joins gets a pod of the new template, which is no progress of the rollout.
func (rs *revisionState) stalled(in Input, settle *v1alpha1.SettleRule) (bool, time.Duration) {
	cur := rs.current
	if cur.Finished != nil || cur.Pending {
		return false, 0
	}
	after := journal.StallAfter(settle)
	if in.Old == nil {
		// A CREATE is never the fix of a stall: the rollout it would adopt stood still while
		// no workload owned it (an orphaning delete holds a rollout as a pause does), and a
		// stall read across the delete would let a re-create with a new template past every
		// rule. The way out: re-create it with the template it had, then fix it.
		return false, after
	}
	// A workload's own minReadySeconds keeps a Ready pod from counting as available that
	// long: no progress is expected sooner.
	after += time.Duration(in.Old.Strategy.MinReadySeconds) * time.Second
	if in.Old.Rollout.Held {
		return false, 0
	}
	if r := &in.Old.Rollout; rs.timeline.Unjournaled && !r.Mixed && r.Progress.Unobserved == 0 {
		// Every pod runs the current template: read from the history alone, nothing says
		// a rollout is under way, and a finished one that lost a pod (an eviction, a pod
		// a quota keeps from being re-created, a relabel back into the selection) would
		// read as stalled since its revision's creation, or by kube's progress deadline
		// after a resume over an unavailable pod, its next edit passing as the fix of a
		// stall, past the fleet limit, the shared budget and the windows. The leader's
		// journal starts the stall clock.
		return false, after
	}
	if r := &in.Old.Rollout; r.DeadlineExceeded && r.ProgressDeadline >= after && in.Now.Sub(cur.Progressed) >= r.ProgressDeadline {
		// kube's verdict: no progress for its deadline, at least the policy's stallAfter.
		// A shorter deadline is the workload's own setting (progressDeadlineSeconds: 1
		// would make every rollout "stalled" at once): the policy's clock decides. The
		// verdict is sticky (kube's DeploymentTimedOut, deployment_util.go, keeps
		// TimedOutReason until the next progress), so a deadline lowered to 1 s and then
		// raised keeps a healthy rollout "stalled": it counts only once holdfast's own
		// record shows no progress for the deadline now set.
		return true, 0
	}
	if in.Old.Rollout.Progress.Unobserved > 0 {
		// Its controller has not acted on the last change yet: nothing says the rollout
		// is stuck (a timeline read from the history alone dates its progress at the
		// revision's creation, and would call any unobserved change a stall).
		return false, after
	}
	if r := in.History.Find(workload.FromFingerprint(cur.Template)); r != nil && rs.timeline.Progressed(r) {
		return false, after // it progressed since the journal last looked
	}
	idle := in.Now.Sub(cur.Progressed)
	return idle >= after, after - idle
}

// checkRevision applies one policy's revision rules to a request that starts a rollout.
func checkRevision(in Input, rules *v1alpha1.RolloutRules, rs *revisionState) []finding {
	var out []finding
	cur := rs.current
	stalled, stallIn := rs.stalled(in, rules.Settle)
	var window time.Duration
	if rules.RevertWindow != nil {
		window = rules.RevertWindow.Duration
	}
	left, wasCurrent := rs.timeline.LeftAt(rs.target, "")
	if !wasCurrent && window > 0 && len(rs.flags) > 0 && rs.timeline.ShapedSince(in.Now.Add(-window)) {
		// A template that differs from an earlier one only in the flags is a return to it.
		if shape, err := in.New.Template.Shape(rs.flags); err == nil {
			left, wasCurrent = rs.timeline.LeftAt(rs.target, shape)
		}
	}
	isReturn := wasCurrent && window > 0 && in.Now.Sub(left) < window

	if rules.Settle != nil && cur.Finished == nil && !rs.cancel && !stalled {
		var msg string
		switch {
		case in.Old == nil && cur.Template == "":
			msg = fmt.Sprintf("%s: holdfast has not yet recorded the deletion of the workload of this name, nor what it last rolled out; retry in a few seconds", in.New)
		case in.Old == nil:
			msg = fmt.Sprintf("%s: a workload of this name was deleted %s after its revision %s became current, before that rollout finished; "+
				"what it left behind would be adopted into a second rollout; create it with the pod template it had, then change it once that rollout finishes or counts as stalled",
				in.New, round(in.Now.Sub(cur.Since)), shortSum(cur.Template))
		case cur.Pending && in.Old != nil && in.Old.Rollout.Held && rs.current.Template == rs.target:
			msg = fmt.Sprintf("%s: holdfast has not yet recorded whether its pod template was rolled out while held; retry in a few seconds", in.New)
		case cur.Lagging:
			msg = fmt.Sprintf("%s changed moments ago and holdfast has not yet recorded the change (%s); retry in a few seconds", in.New, progress(in))
		case cur.Pending:
			msg = fmt.Sprintf("%s began rolling out its current revision moments ago (%s); wait until the rollout completes, "+
				"or roll back to the revision that is still serving", in.New, progress(in))
		default:
			msg = fmt.Sprintf("%s is still rolling out its current revision (%s); wait until the rollout completes, "+
				"roll back to the revision that is still serving, or, if it is stuck, fix it after %s without progress (in %s)",
				in.New, progress(in), journal.StallAfter(rules.Settle), round(max(stallIn, 0)))
		}
		out = append(out, finding{rule: RuleSettle, field: templatePath, message: msg})
	}
	if rules.MinInterval != nil && !rs.cancel && !isReturn {
		since := in.Now.Sub(cur.Since)
		switch wait := rules.MinInterval.Duration - since; {
		case wait <= 0:
		case cur.Lagging:
			out = append(out, finding{rule: RuleMinInterval, field: templatePath, message: fmt.Sprintf(
				"%s changed moments ago and holdfast has not yet recorded when its current revision became current; retry in a few seconds", in.New)})
		default:
			out = append(out, finding{rule: RuleMinInterval, field: templatePath, message: fmt.Sprintf(
				"%s got its current revision %s ago, less than the minimum interval of %s between revisions; retry after %s",
				in.New, round(since), rules.MinInterval.Duration, round(wait))})
		}
	}
	if isReturn {
		since := in.Now.Sub(left)
		wait := window - since
		switch {
		case cur.Finished != nil && !stalled:
			out = append(out, finding{rule: RuleRevertWindow, field: templatePath, message: fmt.Sprintf(
				"%s: the new pod template is the one its current revision replaced %s ago, and that rollout has finished; "+
					"going back within %s is flapping; go forward with a new pod template instead, or retry after %s",
				in.New, round(since), window, round(wait))})
		case rs.timeline.ReturnsSince(in.Now.Add(-window), window) > 0:
			out = append(out, finding{rule: RuleRevertWindow, field: templatePath, message: fmt.Sprintf(
				"%s: the new pod template stopped being current %s ago, and the workload already went back once within %s; "+
					"flapping between revisions is refused; let the current rollout finish and go forward with a new pod template, or retry after %s",
				in.New, round(since), window, round(wait))})
		}
	}
	return out
}

func progress(in Input) string { return in.Old.Rollout.Progress.String() }

// shortSum names a revision by the start of its template's fingerprint.
func shortSum(sum string) string { return sum[:min(len(sum), 10)] }

// checkWindows holds a request that starts a new revision, or lifts a hold off an
// unfinished rollout (resumes), while the policy's windows hold changes: an open Deny
// window, or none of its Allow windows open. Else a template edited while paused before
// the window is rolled out by a resume inside it. A cancel, the fix of a stalled rollout
// and a scale (which starts nothing) pass in every window.
func checkWindows(in Input, spec *v1alpha1.RolloutPolicySpec, rs *revisionState, resumes bool) []finding {
	if len(spec.Windows) == 0 || !(rs.start || resumes || rs.firstPods) || rs.cancel {
		return nil
	}
	if stalled, _ := rs.stalled(in, spec.Rules.Settle); stalled {
		return nil
	}
	// A window that cannot be evaluated is ignored (policy.ParseWindows), never a hold
	// on every start: the policy's status is Ready=False and alerts.
	ws, _ := policy.ParseWindows(spec.Windows)
	h := ws.At(in.Now)
	if !h.Held {
		return nil
	}
	passes := "a rollback to the serving revision, the fix of a stalled rollout and a scale pass"
	if old, ok := oldTemplate(in); in.Replaces != "" {
		passes = "its replacement would be the first pod of the staged template, which starts its rollout; " +
			"evict it after the window, or roll the template back to the serving one"
	} else if !rs.start || ok && old == rs.target {
		// A scale up, a lowered partition or a re-create that makes kube create pods of a
		// staged template is itself the start: saying that a scale passes would mislead.
		passes = "this change makes kube create pods of the staged template, which starts its rollout; " +
			"keep the replicas or partition as they are, or roll the template back to the serving one"
	}
	return []finding{{rule: RuleWindow, field: templatePath, message: fmt.Sprintf(
		"%s: new rollouts are held by the window %q until %s (in %s); %s",
		in.New, h.Window, h.Until.UTC().Format(time.RFC3339), round(h.Until.Sub(in.Now)), passes)}}
}

// oldTemplate is the fingerprint of the template an UPDATE replaces.
func oldTemplate(in Input) (string, bool) {
	if in.Old == nil {
		return "", false
	}
	return in.Old.Template.Sum()
}

// exempted is the record of an admission a temporary exemption let through.
func exempted(policyName string, grant *v1alpha1.TemporaryExemption, found []finding) decision.Violation {
	refused := make([]string, 0, len(found))
	for _, f := range found {
		refused = append(refused, f.rule+": "+f.message)
	}
	return decision.Exempted(policyName, grant, refused)
}

// keepsTwo is whether rolling out the request's template keeps at most two
// templates with live pods (I7): it has live pods, or fewer than two others do.
func keepsTwo(in Input) bool {
	if r := in.History.Find(in.New.Template); r != nil && r.Live > 0 {
		return true
	}
	return liveCount(in) < 2
}
