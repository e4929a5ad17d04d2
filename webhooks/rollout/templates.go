package rollout

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// The rules in this file count what an operator sees: pod templates with live pods
// (history.Revision.Live, terminating pods included). Under settle at most two templates
// have live pods at once (docs/invariants.md, I7). Two kinds of request add a template
// without being a start the revision rules judge: a template edit of an OnDelete workload,
// which kube rolls out pod by pod as pods are replaced, and a scale whose argsMatchReplicas
// flags follow spec.replicas, which changes the template (I4: not a new revision). And a
// start is held to the count too, whatever the journal says of the rollout before it.

// ReadsRevisions is whether deciding the request reads the workload's journal and history:
// a request that may start a rollout (MayStart), or any other UPDATE of its pod template
// (an OnDelete workload's staged edit, a paused or partitioned one's), and an UPDATE whose
// labels bring the workload into a policy's selection (entersSelection), and one that grows
// a StatefulSet below its partition or replaces one of its pods (growsHeld,
// growsBelowPartition, replacesHeld).
func ReadsRevisions(in Input) bool {
	return MayStart(in) || (in.Operation == admissionv1.Update && in.Old != nil && in.TemplateChanged) || createsHeld(in) || growsHeld(in) ||
		growsBelowPartition(in) || replacesHeld(in) || entersSelection(in)
}

// growsHeld is a request after which kube creates pods of a held StatefulSet from its
// template: a scale up of an OnDelete one (kube's newVersionedStatefulSetPod gives an
// ordinal the update revision unless a partition keeps it below), a change of its
// spec.ordinals.start (pods outside the new range are condemned and the missing ordinals
// created by newVersionedStatefulSetPod, stateful_set_control.go updateStatefulSet with
// podInOrdinalRange: a start moved by the replicas or more replaces every pod), or a
// CREATE of a held one, whose missing ordinals get its template even under a partition (a
// created StatefulSet's current revision is its update revision, getStatefulSetRevisions);
// or the eviction or DELETE of a held StatefulSet's or DaemonSet's pod that kube replaces
// from the current template (Input.Replaces). Read from the request alone: startsStaged
// says whether it starts a template.
func growsHeld(in Input) bool {
	if in.Replaces != "" {
		// A pod evicted or deleted: kube's DaemonSet controller (syncNodes) or StatefulSet
		// controller (newVersionedStatefulSetPod) creates its replacement from the template
		// the handler found it would use.
		// A partition's is made from the current revision: its template when the status
		// names it current and update (else replacesHeld).
		n := in.New
		return in.Operation == admissionv1.Update && n != nil && n.Rollout.Held && n.Kind != v1alpha1.KindDeployment &&
			(n.Rollout.OnDelete || (n.Rollout.CurrentIsUpdate && n.Rollout.Progress.Unobserved == 0))
	}
	if in.New == nil || in.New.Kind != v1alpha1.KindStatefulSet || !in.New.Rollout.Held || in.New.Replicas == nil {
		return false
	}
	switch in.Operation {
	case admissionv1.Create:
		return true
	case admissionv1.Update:
		// Under a partition at its replicas the new ordinals get the current revision: its
		// template when the status names it current (a StatefulSet created over what it
		// adopts takes its update revision as current, getStatefulSetRevisions).
		o := in.Old
		if o == nil || o.Replicas == nil {
			return false
		}
		renumbers := in.New.OrdinalStart != o.OrdinalStart && *in.New.Replicas > 0
		return (*in.New.Replicas > *o.Replicas || renumbers) &&
			(in.New.Rollout.OnDelete || (o.Rollout.CurrentIsUpdate && o.Rollout.Progress.Unobserved == 0 && !in.TemplateChanged))
	}
	return false
}

// growsBelowPartition is an UPDATE that adds ordinals below a StatefulSet's partition and
// that growsHeld does not judge as the start of its own template: held after it (more
// replicas, or its ordinals renumbered), or a scale that lifts the hold past ordinals the
// partition still covers (the ordinals from the old replicas up to the partition). kube
// creates those from its current revision (newVersionedStatefulSetPod), which is then not
// known to be its template (a scale that changes the template, a current revision other
// than the update one, a status of an older generation). Read from the request alone.
func growsBelowPartition(in Input) bool {
	o, n := in.Old, in.New
	if in.Operation != admissionv1.Update || in.Replaces != "" || o == nil || n == nil || n.Kind != v1alpha1.KindStatefulSet ||
		n.Rollout.OnDelete || o.Replicas == nil || n.Replicas == nil || growsHeld(in) {
		return false
	}
	// The ordinals below the partition after it: [start, start+min(replicas, partition)),
	// the partition being Want-Target (at least the replicas when held, Target 0); some are
	// new unless the old range [start, start+replicas) covers them.
	below := min(*n.Replicas, n.Rollout.Progress.Want-n.Rollout.Progress.Target)
	from, to := n.OrdinalStart, n.OrdinalStart+below
	return below > 0 && (from < o.OrdinalStart || to > o.OrdinalStart+*o.Replicas)
}

// replacesHeld is the replacement of a pod (Replaces) of a StatefulSet a partition holds
// whose template growsHeld does not know it is made from: kube re-creates the ordinal
// from the current revision (newVersionedStatefulSetPod).
func replacesHeld(in Input) bool {
	return in.Replaces != "" && in.Operation == admissionv1.Update && in.New != nil && in.Old != nil &&
		in.New.Kind == v1alpha1.KindStatefulSet && in.New.Rollout.Held && !in.New.Rollout.OnDelete && !growsHeld(in)
}

// currentTemplates are the templates kube may make growsBelowPartition's new ordinals, or
// replacesHeld's pod, from: that of the revision the old object's status names current,
// found by name in History (or the old template, when the status, of its generation, names
// it current and update). kube moves the current revision only once every replica runs the
// update revision (completeRollingUpdate), which a set held over a template no pod runs does not
// reach; so a status of an older generation names it all the same. A status that names
// none (a set created a moment ago) leaves kube the update revision, the new template
// (getStatefulSetRevisions); one History lacks (the cache has not caught up) leaves the
// old template and the new.
// named is namedCurrent(in).
func currentTemplates(in Input, named *workload.Template) []*workload.Template {
	o := in.Old.Rollout
	if o.CurrentRevision == "" {
		return []*workload.Template{in.New.Template}
	}
	if named != nil {
		return []*workload.Template{named}
	}
	if o.CurrentIsUpdate && o.Progress.Unobserved == 0 {
		return []*workload.Template{in.Old.Template}
	}
	if workload.SameTemplate(in.Old.Template, in.New.Template) {
		return []*workload.Template{in.Old.Template}
	}
	return []*workload.Template{in.Old.Template, in.New.Template}
}

// namedCurrent is the template of the revision the old object's status names current, as
// the cache's revisions have it; nil when they lack it or it names none.
func namedCurrent(in Input) *workload.Template {
	name := in.Old.Rollout.CurrentRevision
	if i := slices.IndexFunc(in.History.Revisions, func(r history.Revision) bool { return r.Name == name }); name != "" && i >= 0 {
		return in.History.Revisions[i].Template
	}
	return nil
}

// currentStarts are the templates of currentTemplates that no live pod runs (by the
// cache, and by the old object's status when it names its template current and update
// and counts pods on it): kube's pods of them would be their first, each a start of its
// own, which decideWithout judges (startOf).
//
// A scale that lifts the hold gives the ordinals at or above the partition the new
// template, its own start (Decide judges it as the lift it is): only a current revision of
// another template is one more.
func currentStarts(in Input) []*workload.Template {
	if !growsBelowPartition(in) && !replacesHeld(in) {
		return nil
	}
	named, p := namedCurrent(in), in.Old.Rollout
	var out []*workload.Template
	for _, t := range currentTemplates(in, named) {
		if r := in.History.Find(t); r != nil && r.Live > 0 {
			continue
		}
		if !in.New.Rollout.Held && workload.SameTemplate(t, in.New.Template) {
			continue
		}
		// The status, of its generation, counts pods of it the cache may not show yet.
		if p.Progress.Unobserved == 0 && ((p.CurrentIsUpdate && p.Progress.Updated > 0 && workload.SameTemplate(t, in.Old.Template)) ||
			(p.CurrentPods > 0 && workload.SameTemplate(t, named))) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// startOf is the request as kube's first pods of template t make it a start: a held
// StatefulSet whose current and update revision is t, with no pod of it and a status of
// its generation, grown (or replacing a pod) with t unchanged, which growsHeld and
// startsStaged read as t's start.
func startOf(in Input, t *workload.Template) Input {
	o, n := *in.Old, *in.New
	o.Template, n.Template = t, t
	o.Rollout.CurrentIsUpdate, o.Rollout.Progress.Unobserved, o.Rollout.Progress.Updated, o.Rollout.Fresh = true, 0, 0, false
	// Held before and after, as kube makes ordinals below a partition: a scale that lifts
	// the hold past them starts the new template above it, judged as the request's own; one
	// that raises the partition with them is held after it.
	o.Rollout.Held = true
	n.Rollout.CurrentIsUpdate, n.Rollout.Held = true, true
	in.Old, in.New, in.TemplateChanged = &o, &n, false
	if in.Replaces != "" {
		in.New = &o // a replacement's workload is the one object
	}
	return in
}

// startsStaged is a request that grows a held StatefulSet (growsHeld) whose template no
// live pod runs (by the cache, and by the old object's status of its own generation):
// kube's first pods of that template come from it, so it is judged as a start (settle,
// minInterval, revertWindow, the windows, the third template), not left to a hold that
// does not hold. A CREATE that adopts as many pods as its replicas, none of them ended or
// terminating, creates none; one it adopts that has ended or is terminating is replaced
// (processReplica deletes a failed one), once gone, from the CREATE's template
// (newVersionedStatefulSetPod: OnDelete, or ordinals below a partition on the current
// revision, which a StatefulSet created over what it adopts takes from its update
// revision).
func startsStaged(in Input) bool {
	if !growsHeld(in) {
		return false
	}
	r := in.History.Find(in.New.Template)
	if in.Old == nil {
		// Created: its template has pods when kube keeps some (Kept), not when any pod
		// carries its revision's hash: one of another name, or another object's, is no
		// member of the set (a pod anyone may label so), and kube creates the ordinals
		// from the template all the same.
		if r != nil && r.Kept > 0 {
			return false
		}
		var adopted int32
		for i := range in.History.Revisions {
			adopted += in.History.Revisions[i].Kept
		}
		return adopted < *in.New.Replicas
	}
	if r != nil && r.Live > 0 {
		return false
	}
	// A status its controller wrote before the last change (Unobserved) counts the pods of
	// the template before it: nothing says the staged one has pods, so the scale starts it.
	p := in.Old.Rollout.Progress
	return in.TemplateChanged || p.Unobserved != 0 || p.Updated == 0
}

// terminatingNote ends the refusals that count live pods: a pod stuck Terminating (on a
// node that is gone) keeps its template live until it is removed.
const terminatingNote = "; pods still Terminating count until they are gone (a pod stuck on a lost node: delete the Node or force-delete the pod)"

// stagesEdit is a template edit of an OnDelete StatefulSet or DaemonSet.
func stagesEdit(in Input) bool {
	return in.Operation == admissionv1.Update && in.Old != nil && in.TemplateChanged && in.New.Rollout.OnDelete
}

// createsHeld is a CREATE of a StatefulSet or DaemonSet that starts held (OnDelete, or a
// partition at its replicas): it adopts what an orphaning delete of a workload of its name
// left behind, and kube creates every missing or replaced pod from its template (a
// StatefulSet's ordinals at or above the partition) without a rollout for I1 to judge.
func createsHeld(in Input) bool {
	return in.Operation == admissionv1.Create && in.New != nil && in.New.Rollout.Held && in.New.Kind != v1alpha1.KindDeployment
}

// liveRevisions are the revisions with live pods, oldest first.
func liveRevisions(h history.History) []*history.Revision {
	var out []*history.Revision
	for i := range h.Revisions {
		if h.Revisions[i].Live > 0 {
			out = append(out, &h.Revisions[i])
		}
	}
	return out
}

// adoptsOthers is whether a CREATE adopts live pods of a template other than its own, which
// kube then replaces unless the workload holds them.
func adoptsOthers(in Input) bool {
	own := in.History.Find(in.New.Template)
	return slices.ContainsFunc(liveRevisions(in.History), func(r *history.Revision) bool { return r != own })
}

// liveCount is how many templates have live pods: those the cache shows, or two when the
// cache shows one and the stored object's status already counts pods on its template
// beside pods on others (the cache may not show a new revision's pods, or the revision
// itself, yet).
func liveCount(in Input) int {
	n := 0
	for i := range in.History.Revisions {
		if in.History.Revisions[i].Live > 0 {
			n++
		}
	}
	if p := in.Old; n == 1 && p != nil && p.Rollout.Progress.Updated > 0 && p.Rollout.Progress.Total > p.Rollout.Progress.Updated {
		return 2 // pods on its template, and pods that are not (a node without a pod is neither)
	}
	if p := in.Old; n == 1 && p != nil && in.TemplateChanged && rollsOwnTemplate(p) && p.Rollout.Progress.Updated == 0 && p.Rollout.Progress.Total > 0 {
		if r := in.History.Find(p.Template); r == nil || r.Live == 0 {
			// Its controller is making its own template's first pods while the pods it
			// counts run another (a flag-following scale's rollout, a cache that does not
			// show the new ReplicaSet's pods yet, or their pods deleted a moment ago): a
			// change to another template is a third. (A request that keeps the template,
			// a partition lowered, is no new template.)
			return 2
		}
	}
	return n
}

// rollsOwnTemplate is a workload whose controller acts on its template now: a rollout in
// progress, of this generation, neither held nor paused.
func rollsOwnTemplate(w *workload.Workload) bool {
	r := &w.Rollout
	return r.InProgress && !r.Held && !r.Paused && r.Progress.Unobserved == 0 && r.Progress.Target > 0
}

func describe(revs []*history.Revision) string {
	parts := make([]string, 0, len(revs))
	for _, r := range revs {
		parts = append(parts, fmt.Sprintf("revision %d: %d", r.Number, r.Live))
	}
	return strings.Join(parts, ", ")
}

// checkStagedEdit judges a template edit of an OnDelete workload under settle. kube's
// StatefulSet and DaemonSet controllers create every new or replacement pod of such a
// workload from its current template (a node joins, a pod is deleted or evicted), so the
// edit is one more template with pods as soon as a pod is replaced. It is admitted when
// the template it replaces has no live pods (it was only staged), when it returns to a
// template that has live pods, or while no other template has live pods (it starts an
// OnDelete rollout: two templates at most); otherwise it would make a third.
func checkStagedEdit(in Input, rules *v1alpha1.RolloutRules) []finding {
	if rules.Settle == nil || !(stagesEdit(in) || createsHeld(in)) {
		return nil
	}
	if r := in.History.Find(in.New.Template); r != nil && r.Live > 0 {
		return nil // a return to a template that has pods
	}
	if in.Old == nil {
		// Created held over what it adopts: a template those pods do not run is one more.
		live := liveRevisions(in.History)
		if len(live) < 2 {
			return nil
		}
		return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
			"%s is created held (updateStrategy OnDelete or a partition at its replicas) over pods of %d pod templates it adopts "+
				"(pods by %s), and kube creates every missing or replacement pod from its template, so it would make one more; "+
				"create it with the template of revision %d, which still has pods%s",
			in.New, len(live), describe(live), live[len(live)-1].Number, terminatingNote)}}
	}
	// The cache may not show yet a pod the controller created from the replaced template;
	// the stored object's status, once the controller has seen its generation, does.
	replaced := in.History.Find(in.Old.Template)
	progress := in.Old.Rollout.Progress
	unseen := replaced == nil || replaced.Live == 0
	if unseen && progress.Unobserved == 0 && progress.Updated == 0 {
		return nil // the replaced template was only staged
	}
	live := liveRevisions(in.History)
	var older *history.Revision
	others := 0
	for _, r := range live {
		if r != replaced {
			others++
			if older == nil {
				older = r
			}
		}
	}
	if others == 0 && unseen && progress.Total > progress.Updated {
		// The cache shows no pod of it or of another template, but the stored status counts
		// pods beside those of its template (a re-created workload whose adopted pods the
		// cache has not seen yet). A cache that shows the replaced template's pods is read
		// as it is: a terminating pod counts in a StatefulSet's status.replicas and not in
		// its updatedReplicas.
		return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
			"%s (updateStrategy OnDelete): its status counts %d of %d pods on its current template and the others on "+
				"another, which holdfast has not seen yet; retry in a few seconds", in.New, progress.Updated, progress.Total)}}
	}
	if others == 0 {
		return nil // it starts an OnDelete rollout: two templates at most
	}
	if unseen && progress.Unobserved != 0 {
		// The controller has not reported on the last change yet (a switch to OnDelete,
		// say), and the cache may not show the pods it made of the replaced template.
		return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
			"%s (updateStrategy OnDelete) changed moments ago and its controller has not yet reported whether pods run "+
				"its current template beside those of revision %d; retry in a few seconds", in.New, older.Number)}}
	}
	return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
		"%s (updateStrategy OnDelete): its pods already run %d pod templates (pods by %s), and kube creates every new or "+
			"replacement pod from the current template, so this edit would make one more; return to the template of "+
			"revision %d, which still has pods, or first replace the pods of revision %d so that every pod runs the current template%s",
		in.New, others+1, describe(live), older.Number, older.Number, terminatingNote)}}
}

// checkScaleDuringRollout judges a scale whose argsMatchReplicas flags follow
// spec.replicas while the workload's rollout is unfinished. It starts no revision (I4),
// but its template differs: kube makes a ReplicaSet (a revision) per template, so A→B then
// B@3→B@4 leaves pods of A, B@3 and B@4 at once. It is admitted towards a template that
// still has live pods (a scale back), while at most one template has live pods, or once
// the rollout has stalled (a scale may be the fix).
func checkScaleDuringRollout(in Input, rules *v1alpha1.RolloutRules, rs *revisionState) []finding {
	if rules.Settle == nil || !rs.scale {
		return nil
	}
	if r := in.History.Find(in.New.Template); r != nil && r.Live > 0 {
		return nil
	}
	n, pending := liveCount(in), false
	if p := in.Old; n == 1 && p != nil && !p.Rollout.Held && p.Rollout.InProgress {
		if r := in.History.Find(p.Template); r == nil || r.Live == 0 {
			// The template it rolls toward has no pod the cache shows, and its controller
			// may be creating the first now (it acted on the change, or is about to): the
			// scale's template would be a third (rollout explorer, seed 16898 of 50,000).
			n, pending = 2, true
		}
	}
	if n < 2 {
		return nil
	}
	live := liveRevisions(in.History)
	view := revisionState{flags: rs.flags}
	view.timeline = journal.View(in.Journal, in.New.Kind, in.Old, in.History, rs.flags, in.Now)
	if view.current = view.timeline.Current(); view.current != nil {
		if stalled, _ := view.stalled(in, rules.Settle); stalled {
			return nil
		}
	}
	if pending {
		return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
			"%s: the scale changes the pod template (its flags follow spec.replicas) while its rollout to the current "+
				"template is starting (%s), whose first pods holdfast has not seen yet; retry in a few seconds, or finish or "+
				"roll back first", in.New, progress(in))}}
	}
	return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
		"%s: the scale changes the pod template (its flags follow spec.replicas) while pods of %s are live; "+
			"kube makes one more set of pods for it: finish or roll back first, or use an exempt identity%s",
		in.New, liveOf(in, live), terminatingNote)}}
}

// checkThirdTemplate judges a start under settle by the templates with live pods: a new
// template while two others have live pods would be a third, whatever the journal says
// (a scale's rollout keeps its revision's "finished": A@3 rolling to A@4 is one revision
// to I1, two templates to kube). A cancel (back to a template with pods) and the fix of a
// stalled rollout pass, as in I1. A CREATE is judged by what it would adopt: a workload
// deleted with --cascade=orphan mid-scale leaves two templates with pods. A partitioned
// StatefulSet's canary counts too: its ordinals below the partition keep the old template,
// so a third one waits until the partition is lowered and the rollout finishes.
func checkThirdTemplate(in Input, rules *v1alpha1.RolloutRules, rs *revisionState) []finding {
	if rules.Settle == nil || !(rs.start || rs.resumes) || rs.cancel {
		return nil
	}
	if r := in.History.Find(in.New.Template); r != nil && r.Live > 0 {
		return nil
	}
	if p := in.Old; p != nil && !in.TemplateChanged && p.Rollout.Progress.Updated > 0 && p.Rollout.Progress.Unobserved == 0 {
		return nil // a resume of a template the status (of this generation) counts pods on
	}
	current := growsCurrent(in)
	if liveCount(in)+current < 2 {
		return nil
	}
	if rs.current != nil {
		if stalled, _ := rs.stalled(in, rules.Settle); stalled {
			return nil
		}
	}
	live := liveRevisions(in.History)
	if current > 0 {
		return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
			"%s: the new ordinals below the partition get its current revision's template, which no pod runs yet, and those above "+
				"it the new template, while pods of %d pod templates (pods by %s) are live: one more; scale once every pod runs "+
				"one template%s%s",
			in.New, len(live), describe(live), returnTo(live), terminatingNote)}}
	}
	wait := "wait until every pod runs one template"
	if p := in.New.Rollout.Progress; in.New.Kind == v1alpha1.KindStatefulSet && p.Target < p.Want {
		wait = "lower the partition to 0 and let the rollout finish" // its canary keeps the old template below it
	}
	return []finding{{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
		"%s: pods of %s are live; a new template would be one more: %s%s%s",
		in.New, liveOf(in, live), wait, returnTo(live), terminatingNote)}}
}

// growsCurrent is 1 when the request gives a template no pod runs its first pods besides
// the new one: an UPDATE of a StatefulSet under RollingUpdate that adds ordinals below the
// partition and lifts the hold past them, which kube creates from its current revision
// (newVersionedStatefulSetPod) while the ordinals at or above it get the new template:
// currentStarts names a template other than the new one. (Still held after it, the new
// template gets none, and the new ordinals are a start of the current revision's alone.)
func growsCurrent(in Input) int {
	if in.New.Rollout.Held || len(currentStarts(in)) == 0 {
		return 0
	}
	return 1
}

// liveOf says which templates have live pods: by revision from the cache, or, when only
// the stored object's status shows the second, from that status.
func liveOf(in Input, live []*history.Revision) string {
	if len(live) >= 2 {
		return fmt.Sprintf("%d pod templates (pods by %s)", len(live), describe(live))
	}
	p := in.Old.Rollout.Progress
	return fmt.Sprintf("2 pod templates (the status counts %d of %d pods on the current one)", p.Updated, max(p.Total, p.Want))
}

// returnTo names the way back: the newest revision with live pods.
func returnTo(live []*history.Revision) string {
	if len(live) == 0 {
		return ""
	}
	return fmt.Sprintf(", or return to the template of revision %d", live[len(live)-1].Number)
}
