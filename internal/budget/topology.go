package budget

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Pod is what Disrupted reads of a pod of the group (the caller reads it from
// workload.Pod): whether it still runs (not terminating nor ended), whether it is available
// (Ready for minReadySeconds and the clock margin, not terminating), when it was created,
// and its node's value of the topology key ("" for a node without it, with it empty, or
// one not read: no domain).
type Pod struct {
	UID       types.UID
	Created   time.Time
	Running   bool
	Available bool
	Domain    string
}

// NotRecorded begins the name of the domain of a record admitted without a value for the
// topology key (Disrupted), followed by its pod's name and UID. A label value has no spaces,
// so it is no node's domain.
const NotRecorded = "(not recorded)"

// Disrupted is the topology domains (values of key) with pods of a group that holdfast
// admitted down and whose replacements are not available yet, each with the latest time it
// frees (by the bound, if no replacement comes first). An admitted eviction or delete
// (a record) disrupts its domain from the moment it is admitted until:
//   - its pod still serves after EvictionLapse: kube refused it, nothing went down;
//   - the group is whole again: as many available pods as it expects (and it expects some);
//   - its domain is whole again: as many of the group's pods available there, the record's
//     own aside, as served there when it was admitted, the record's own included
//     (Eviction.Serving). Counted, not matched: kube's controllers re-create a pod
//     wherever the scheduler puts it, so a replacement is no particular pod. A DaemonSet's
//     agent that comes back on its cordoned node makes its domain whole; a Deployment's
//     pod re-created in another zone does not (that zone gained, this one is still short:
//     two zones would be down if another were drained now), and the domain frees when the
//     group is whole or by the bound. A pod re-created in another zone for another reason
//     (a crash, a node-pressure eviction, a manual delete) frees nothing here. The count
//     compares pods with pods, read from the caches of any replica alike: no clock is
//     read, and a pod that served before the eviction is in the count it must get back to;
//   - or bound has passed since it was admitted (topologyBudget.replacementTimeout): a
//     replacement that cannot be scheduled, or a domain that lost another pod meanwhile,
//     does not hold every other domain for ever.
//
// A record without the count (written by a release that did not keep it) frees its domain
// once a pod of the group created after it (read with the clock margin of the replica
// that wrote it) is available in the same domain and not counted for another record.
//
// A record admitted while key was not among the policies' topology keys (the key changed,
// or the budget was added, while a drain ran) has no value for it: its pod went down in a
// domain nobody read, which disrupts a domain of its own (NotRecorded and the pod: two such
// records are two domains, since the pods may have been in two) until the pod is
// seen running after the lapse, the group is whole, or the bound passes; no replacement is
// counted in it. A record of a node without the key says so with an empty value, and
// disrupts no domain.
//
// Pods that are unavailable for other reasons (a NotReady node, a crash) disrupt no
// domain: holdfast did not take them down, and one failing node in one zone must not hold
// the drains of all others. Records are read with the clock margin of the replica that
// wrote them (self is this replica).
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
		domain, recorded := r.Domains[key]
		if !recorded {
			// Admitted while key was no topology key of the policies that applied: the pod
			// went down in a domain nobody read. Its node's domain if it is still there.
			domain = NotRecorded + " " + r.Pod + " " + string(r.UID)
			if i := slices.IndexFunc(pods, func(p Pod) bool { return p.UID == r.UID }); i >= 0 {
				domain = pods[i].Domain
			}
		}
		if domain == "" {
			continue // in no domain: its node lacked the key, or had it empty
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
		} else if served, counted := r.Serving[key]; counted {
			if servingIn(pods, domain, r.UID) >= served {
				continue
			}
		} else if j := slices.IndexFunc(pods, func(p Pod) bool {
			return p.UID != r.UID && p.Domain == domain && !used[p.UID] && !p.Created.Before(r.At.Add(margin)) && p.Available
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

// servingIn counts the pods available in domain, but the one with UID except.
func servingIn(pods []Pod, domain string, except types.UID) int32 {
	var n int32
	for _, p := range pods {
		if p.Available && p.Domain == domain && p.UID != except {
			n++
		}
	}
	return n
}
