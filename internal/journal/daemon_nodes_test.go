package journal

import (
	"testing"
	"time"

	"github.com/holdfast-dev/holdfast/internal/history"
)

// podsOnNodes is agentHistory with the nodes joined names as those the DaemonSet runs on
// (History.Nodes).
func podsOnNodes(t *testing.T, pods map[string]string, joined map[string]time.Time) history.History {
	t.Helper()
	h := agentHistory(t, pods, joined)
	h.Nodes = []time.Time{}
	for _, j := range joined {
		h.Nodes = append(h.Nodes, j)
	}
	return h
}

// observeOnNodes is the leader observing the DaemonSet at at, with pods (node: revision
// hash, all Ready) on the nodes named, which joined an hour before the rollout.
func observeOnNodes(t *testing.T, j *Journal, at time.Time, pods map[string]string, nodes ...string) *Journal {
	t.Helper()
	joined := map[string]time.Time{}
	for _, n := range nodes {
		joined[n] = prevT0.Add(-time.Hour)
	}
	var updated int32
	for _, hash := range pods {
		if hash == "konnectivity-agent-b" {
			updated++
		}
	}
	return Observe(j, agent(t, int32(len(pods)), updated, int32(len(pods))), podsOnNodes(t, pods, joined), nil, at)
}

// TestDaemonSetNodesGoneBeforeTheirPods: nodes n1..n3 (with updated pods) leave
// mid-rollout. The pod garbage collector deletes the pods of a deleted node some 40 s
// later (a drain leaves DaemonSet pods), so the leader's first look after the nodes are
// gone still finds their Ready pods. Counted, they held the mark at 5 when the nodes went,
// and once they were gone the node count no longer dropped: the rollout updated n6 and n7
// and never passed 5, a healthy rollout read as stalled (its next edit then passing as the
// fix). A pod on a node the cache does not hold serves no node that needed the rollout.
func TestDaemonSetNodesGoneBeforeTheirPods(t *testing.T) {
	b, a := "konnectivity-agent-b", "konnectivity-agent-a"
	all := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	rest := all[3:]
	j := observeOnNodes(t, nil, prevT0, map[string]string{"n1": b, "n2": b, "n3": b, "n4": b, "n5": a, "n6": a, "n7": a, "n8": a}, all...)
	first := prevT0.Add(time.Minute)
	j = observeOnNodes(t, j, first, map[string]string{"n1": b, "n2": b, "n3": b, "n4": b, "n5": b, "n6": a, "n7": a, "n8": a}, all...)
	if j.Observed.Updated != 5 || j.Observed.Nodes != 8 {
		t.Fatalf("setup: %+v", j.Observed)
	}
	// n1..n3 deleted; their pods still in the cache (PodGC has not run yet).
	j = observeOnNodes(t, j, prevT0.Add(2*time.Minute), map[string]string{"n1": b, "n2": b, "n3": b, "n4": b, "n5": b, "n6": a, "n7": a, "n8": a}, rest...)
	// PodGC removed them.
	j = observeOnNodes(t, j, prevT0.Add(3*time.Minute), map[string]string{"n4": b, "n5": b, "n6": a, "n7": a, "n8": a}, rest...)
	t.Logf("after the pods went: observed %+v", *j.Observed)
	p6 := prevT0.Add(4 * time.Minute)
	j = observeOnNodes(t, j, p6, map[string]string{"n4": b, "n5": b, "n6": b, "n7": a, "n8": a}, rest...)
	p7 := prevT0.Add(5 * time.Minute)
	j = observeOnNodes(t, j, p7, map[string]string{"n4": b, "n5": b, "n6": b, "n7": b, "n8": a}, rest...)
	if got := j.Current().Progressed; !got.Equal(p7) {
		t.Errorf("n6 then n7 updated after the nodes (and then their pods) left: progressed %s (%s after the rollout last moved), observed %+v; want progress at %s",
			got, p7.Sub(got), *j.Observed, p7)
	}
}
