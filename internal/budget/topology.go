package budget

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Pod is what Disrupted reads of a pod of the group (the caller reads it from
// workload.Pod): whether it still runs (not terminating nor ended), whether it is available
// (Ready for minReadySeconds and the clock margin, not terminating), and when it was created.
type Pod struct {
	UID       types.UID
	Created   time.Time
	Running   bool
	Available bool
}

// Disrupted is the topology domains (values of key) with pods of a group that holdfast
// admitted down and whose replacements are not available yet, each with the latest time it
// frees (by the bound, if no replacement comes first). An admitted eviction or delete
// (a record) disrupts its domain from the moment it is admitted until:
//   - its pod still serves after EvictionLapse: kube refused it, nothing went down;
//   - the group is whole again: as many available pods as it expects (and it expects some);
//   - a replacement is available: a pod of the group created after the record (read
//     with the writer's clock margin added: a pod created just before the record is no
//     replacement, whatever the two clocks say), not the
//     record's own, available (Ready for minReady and not terminating) and not already
//     counted as another record's replacement. A DaemonSet's agent that comes back on its
//     cordoned node is such a replacement, as a Deployment's pod in another zone is;
//   - or bound has passed since it was admitted (topologyBudget.replacementTimeout): a
//     replacement that cannot be scheduled does not hold every other domain for ever.
//
// Pods that are unavailable for other reasons (a NotReady node, a crash) disrupt no
// domain: holdfast did not take them down, and one failing node in one zone must not hold
// the drains of all others. Records without a value for key (the pod's node had no such
// label, or a release that did not record domains wrote them) disrupt no domain. Records
// are read with the clock margin of the replica that wrote them (self is this replica).
func Disrupted(records []Eviction, pods []Pod, expected int32, key string, bound time.Duration, now time.Time, self string) map[string]time.Time {
	var available int32
	for _, p := range pods {
		if p.Available {
			available++
		}
	}
	// A group that expects no pods (a DaemonSet whose status has not counted its nodes yet)
	// is never whole: only replacements free its domains.
	whole := expected > 0 && available >= expected
	sorted := slices.Clone(records)
	slices.SortStableFunc(sorted, func(a, b Eviction) int { return a.At.Compare(b.At) })
	used := map[types.UID]bool{}
	out := map[string]time.Time{}
	for _, r := range sorted {
		domain, ok := r.Domains[key]
		if !ok {
			continue
		}
		margin := Margin(self, r.By)
		frees := r.At.Add(margin + bound)
		if !now.Before(frees) {
			continue
		}
		i := slices.IndexFunc(pods, func(p Pod) bool { return p.UID == r.UID })
		if i >= 0 && pods[i].Running {
			if now.Sub(r.At) >= EvictionLapse+margin {
				continue // kube refused it: the pod still runs
			}
		} else if whole {
			continue
		} else if j := slices.IndexFunc(pods, func(p Pod) bool {
			return p.UID != r.UID && !used[p.UID] && !p.Created.Before(r.At.Add(margin)) && p.Available
		}); j >= 0 {
			used[pods[j].UID] = true
			continue
		}
		if frees.After(out[domain]) {
			out[domain] = frees
		}
	}
	return out
}
