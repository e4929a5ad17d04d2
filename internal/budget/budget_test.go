package budget_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/ledger"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// The ledgers these tests write are those testdata/previous/ holds as release 5648181
// wrote them: the same workload, policy, replicas and times.
const (
	ns       = "holdfast-system"
	replicaA = "holdfast-6f9c7d8b5-2xk4p"
	replicaB = "holdfast-6f9c7d8b5-9qz7m"
	// agent is the UID of the DaemonSet kube-system/konnectivity-agent, whose group the
	// group ledger is; agentTemplate the fingerprint of its pod template.
	agent         types.UID = "5f0c8a7e-2b1d-4e3f-9a6c-7d8e9f0a1b2c"
	agentTemplate           = "79ccc01c2a8859254604409c13560c9f7d7b8c525eddcd1d262b2ec6ce92c731"
	kasTemplate             = "f5fb2199ae58b4b88ece56c05eb470b9fcd95b2134779f82e51b72f145d43e86"
)

var (
	agentGroup = budget.GroupID{Kind: v1alpha1.KindDaemonSet, Namespace: "kube-system", Name: "konnectivity-agent", UID: agent}

	t0     = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	policy = &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents-rollouts", UID: "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f"}}

	// What the ledgers in testdata/previous/ hold.
	rolloutStart = budget.RolloutStart{Template: agentTemplate, At: t0.Add(-10 * time.Minute), By: replicaA,
		RolloutPolicy: "agents-rollouts", Budgets: []string{"agents"}}
	evictions = []budget.Eviction{
		{Pod: "konnectivity-agent-7xq2d", UID: "1c2d3e4f-0000-4000-8000-00000000a001", At: t0, By: replicaA},
		{Pod: "konnectivity-agent-m4k9s", UID: "1c2d3e4f-0000-4000-8000-00000000a002", At: t0.Add(1500 * time.Millisecond), By: replicaB},
	}
	starts = []budget.Start{
		{Workload: "DaemonSet kube-system/konnectivity-agent", Template: agentTemplate, At: t0.Add(-10 * time.Minute), By: replicaA},
		{Workload: "Deployment tenant-a/kube-apiserver", Template: kasTemplate, At: t0.Add(-9 * time.Minute), By: replicaB},
	}
)

// replicas are two replicas' ledgers on one store, the API server.
func replicas(store *memstore.Store) (a, b *budget.Ledgers) {
	live := memstore.Writer{Store: store}
	return &budget.Ledgers{Live: live, Namespace: ns, Identity: replicaA}, &budget.Ledgers{Live: live, Namespace: ns, Identity: replicaB}
}

// storedLease is the Lease at key as holdfast wrote it: without the UID and
// resourceVersion the store (the API server) sets.
func storedLease(t *testing.T, store *memstore.Store, key client.ObjectKey) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := store.Get(context.Background(), key, l); err != nil {
		t.Fatal(err)
	}
	l.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	l.UID, l.ResourceVersion = "", ""
	return l
}

// previousLease puts the Lease of testdata/previous/<name> in a new store, and returns
// both; edit, when not nil, changes the Lease first.
func previousLease(t *testing.T, name string, edit func(*coordinationv1.Lease)) (*memstore.Store, *coordinationv1.Lease) {
	t.Helper()
	l := &coordinationv1.Lease{}
	golden.Load(t, "testdata/previous/"+name, l)
	if edit != nil {
		edit(l)
	}
	store := memstore.New(nil)
	store.Put(l.DeepCopy())
	return store, l
}

// TestGroupLedgerStoredForm pins the group ledger as the guards write it: the Lease's name
// (GroupPrefix and the workload's UID), label, annotation keys, the JSON of the eviction
// and rollout-start records, and the holder and renew time of the last write.
func TestGroupLedgerStoredForm(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	a, b := replicas(store)
	g, err := a.ReadGroup(ctx, agentGroup)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RecordRolloutStart(ctx, a, rolloutStart); err != nil {
		t.Fatal(err)
	}
	for i, l := range []*budget.Ledgers{a, b} {
		g, err := l.ReadGroup(ctx, agentGroup)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.RecordEviction(ctx, l, evictions[i], budget.MinRetention); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.Len(&coordinationv1.Lease{}); n != 1 {
		t.Fatalf("%d Leases, want the group's one", n)
	}
	golden.AssertJSON(t, "testdata/group-lease.golden", storedLease(t, store, budget.GroupKey(ns, agent)))
}

// TestFleetLedgerStoredForm pins a RolloutPolicy's fleet ledger as the rollout guard
// writes it: the Lease's name (StartsPrefix and a hash of the policy's name), label, owner,
// annotation key and the JSON of the start records.
func TestFleetLedgerStoredForm(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	a, b := replicas(store)
	for i, l := range []*budget.Ledgers{a, b} {
		f, err := l.ReadFleet(ctx, policy)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.RecordStart(ctx, l, starts[i]); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.Len(&coordinationv1.Lease{}); n != 1 {
		t.Fatalf("%d Leases, want the policy's one", n)
	}
	golden.AssertJSON(t, "testdata/fleet-lease.golden", storedLease(t, store, budget.StartsKey(ns, policy.Name)))
}

// groupAsWritten reads the agents' group ledger and requires the evictions and the
// rollout start the fixture holds.
func groupAsWritten(t *testing.T, a *budget.Ledgers) budget.Group {
	t.Helper()
	g, err := a.ReadGroup(context.Background(), agentGroup)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(evictions, g.Records); diff != "" {
		t.Errorf("evictions (-written +read):\n%s", diff)
	}
	rs, ok := g.RolloutStart()
	if diff := cmp.Diff(rolloutStart, rs); !ok || diff != "" {
		t.Errorf("rollout start, ok %t (-written +read):\n%s", ok, diff)
	}
	return g
}

// TestReadsThePreviousReleasesGroupLedger: a group ledger release 5648181 wrote (two
// replicas' evictions, a shared-budget rollout start) reads as it was written, its last
// write is its renew time, and this release's next eviction keeps what it held.
func TestReadsThePreviousReleasesGroupLedger(t *testing.T) {
	ctx := context.Background()
	store, prev := previousLease(t, "group-lease.json", nil)
	a, _ := replicas(store)
	g := groupAsWritten(t, a)
	if last := ledger.LastWrite(prev); !last.Equal(time.Date(2026, 11, 30, 12, 0, 1, 623456000, time.UTC)) {
		t.Errorf("LastWrite = %v, want the renew time of replica B's write", last)
	}
	if budget.Margin(replicaA, g.Records[0].By) != 0 || budget.Margin(replicaA, g.Records[1].By) != budget.MaxClockSkew {
		t.Error("a record's by does not name the replica whose clock it was written on")
	}

	next := budget.Eviction{Pod: "konnectivity-agent-q8w3n", UID: "1c2d3e4f-0000-4000-8000-00000000a003", At: t0.Add(5 * time.Second), By: replicaA}
	if err := g.RecordEviction(ctx, a, next, budget.MinRetention); err != nil {
		t.Fatalf("writing over the previous release's ledger: %v", err)
	}
	g, err := a.ReadGroup(ctx, agentGroup)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(evictions[:2:2], next), g.Records); diff != "" {
		t.Errorf("evictions after this release's write (-want +got):\n%s", diff)
	}
	if got, want := g.Annotation(budget.RolloutStartAnnotation), prev.Annotations["holdfast.dev/rollout-start"]; got != want {
		t.Errorf("the rollout start the previous release wrote became %s", got)
	}
}

// TestGroupReadsTheLedgersOfEarlierWorkloadsOfItsName: a workload created again under its
// name (a new UID) reads what the ledger of the one before it holds, its evictions and its
// shared rollout's start, as its own, and its next write keeps them; another workload, or
// one whose ledger's digest is the same and whose name is not, reads none of them. The
// previous release's unlabelled ledger of this very workload is still read (by its UID)
// and labelled by the next write.
func TestGroupReadsTheLedgersOfEarlierWorkloadsOfItsName(t *testing.T) {
	ctx := context.Background()
	store, _ := previousLease(t, "group-lease.json", nil) // agent's, unlabelled
	a, b := replicas(store)
	g := groupAsWritten(t, a)
	touched := budget.Eviction{Pod: "konnectivity-agent-m4k9s", UID: evictions[1].UID, At: t0.Add(3 * time.Second), By: replicaA}
	if err := g.RecordEviction(ctx, a, touched, budget.MinRetention); err != nil {
		t.Fatal(err)
	}
	if got := storedLease(t, store, budget.GroupKey(ns, agent)); got.Labels[budget.WorkloadLabel] == "" ||
		got.Annotations[budget.WorkloadAnnotation] != "DaemonSet/kube-system/konnectivity-agent" {
		t.Fatalf("the previous release's ledger written by this one is not named by its workload: %v %v", got.Labels, got.Annotations)
	}
	// A ledger whose digest label is the agent's and whose workload is another's.
	forged := storedLease(t, store, budget.GroupKey(ns, agent))
	forged.Name, forged.Annotations[budget.WorkloadAnnotation] = budget.GroupPrefix+"forged", "DaemonSet/kube-system/other"
	forged.Annotations[budget.EvictionsAnnotation] = `[{"pod":"other-1","uid":"other-1","at":"2026-11-30T12:00:09Z"}]`
	store.Put(forged)

	again := agentGroup
	again.UID = "9e8d7c6b-0000-4000-8000-0000000000aa"
	g, err := b.ReadGroup(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	want := []budget.Eviction{evictions[0], touched}
	if diff := cmp.Diff(want, g.Records); diff != "" {
		t.Errorf("the re-created workload's records (-want +got):\n%s", diff)
	}
	if rs, ok := g.RolloutStart(); !ok || !cmp.Equal(rs, rolloutStart) {
		t.Errorf("the re-created workload's shared rollout start = %+v, %t; want the earlier workload's", rs, ok)
	}
	next := budget.Eviction{Pod: "konnectivity-agent-q8w3n", UID: "1c2d3e4f-0000-4000-8000-00000000a003", At: t0.Add(5 * time.Second), By: replicaB}
	if err := g.RecordEviction(ctx, b, next, budget.MinRetention); err != nil {
		t.Fatal(err)
	}
	var kept []budget.Eviction
	stored := storedLease(t, store, budget.GroupKey(ns, again.UID))
	if err := json.Unmarshal([]byte(stored.Annotations[budget.EvictionsAnnotation]), &kept); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(want, next), kept); diff != "" {
		t.Errorf("the re-created workload's ledger as written (-want +got):\n%s", diff)
	}
	if got := stored.Annotations[budget.RolloutStartAnnotation]; got == "" {
		t.Error("the earlier workload's rollout start was not kept in the re-created workload's ledger")
	}
	// The earlier ledger is superseded: a replica whose cache still shows the deleted
	// workload reads and writes the re-created one's.
	if got := storedLease(t, store, budget.GroupKey(ns, agent)).Annotations[budget.SupersededAnnotation]; got != string(again.UID) {
		t.Fatalf("the earlier ledger is superseded by %q, want %s", got, again.UID)
	}
	if g, err = a.ReadGroup(ctx, agentGroup); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(want, next), g.Records); diff != "" {
		t.Errorf("the deleted workload's group read by a stale replica (-want +got):\n%s", diff)
	}

	other := agentGroup
	other.Name, other.UID = "other", "other-uid"
	if g, err = a.ReadGroup(ctx, other); err != nil || len(g.Records) != 0 {
		t.Errorf("another workload reads %v (%v), want nothing of the agent's", g.Records, err)
	}
	if _, ok := g.RolloutStart(); ok {
		t.Error("another workload reads the agent's rollout start")
	}
}

// TestReCreatedGroupWritesConflictWithTheDeletedOnes: the re-created workload's first
// write and a write to the deleted workload's ledger (a replica whose cache still shows it)
// never both succeed on what each read: the second conflicts, and decides again.
func TestReCreatedGroupWritesConflictWithTheDeletedOnes(t *testing.T) {
	ctx := context.Background()
	again := agentGroup
	again.UID = "9e8d7c6b-0000-4000-8000-0000000000aa"
	rec := func(pod string, at time.Duration) budget.Eviction {
		return budget.Eviction{Pod: pod, UID: types.UID(pod), At: t0.Add(at), By: replicaA}
	}
	for name, c := range map[string]struct{ staleFirst bool }{"the stale replica writes first": {true}, "the re-created group writes first": {false}} {
		t.Run(name, func(t *testing.T) {
			store := memstore.New(nil)
			a, b := replicas(store)
			g, err := a.ReadGroup(ctx, agentGroup)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.RecordEviction(ctx, a, rec("p0", 0), budget.MinRetention); err != nil {
				t.Fatal(err)
			}
			stale, err := a.ReadGroup(ctx, agentGroup)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := b.ReadGroup(ctx, again)
			if err != nil {
				t.Fatal(err)
			}
			first, second := func() error { return stale.RecordEviction(ctx, a, rec("p1", time.Second), budget.MinRetention) },
				func() error { return fresh.RecordEviction(ctx, b, rec("p2", time.Second), budget.MinRetention) }
			if !c.staleFirst {
				first, second = second, first
			}
			if err := first(); err != nil {
				t.Fatal(err)
			}
			if err := second(); !apierrors.IsConflict(err) {
				t.Fatalf("the second write = %v, want a conflict", err)
			}
		})
	}
}

// TestReCreatedGroupsStartIsTheOneRecorded: the re-created workload's first write that
// records a rollout start stores that start, even when the earlier ledger's start reads
// newer (its writer's clock ahead by the skew replicas may have): the start the rollout
// guard admitted is the one the eviction guard holds drains for.
func TestReCreatedGroupsStartIsTheOneRecorded(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	a, b := replicas(store)
	g, err := a.ReadGroup(ctx, agentGroup)
	if err != nil {
		t.Fatal(err)
	}
	ahead := rolloutStart
	ahead.At = t0.Add(budget.MaxClockSkew)
	if err := g.RecordRolloutStart(ctx, a, ahead); err != nil {
		t.Fatal(err)
	}
	again := agentGroup
	again.UID = "9e8d7c6b-0000-4000-8000-0000000000aa"
	if g, err = b.ReadGroup(ctx, again); err != nil {
		t.Fatal(err)
	}
	mine := budget.RolloutStart{Template: kasTemplate, At: t0, By: replicaB, RolloutPolicy: "agents-rollouts", Budgets: []string{"agents"}}
	if err := g.RecordRolloutStart(ctx, b, mine); err != nil {
		t.Fatal(err)
	}
	if g, err = b.ReadGroup(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, ok := g.RolloutStart(); !ok || !cmp.Equal(got, mine) {
		t.Errorf("the re-created workload's rollout start = %+v, %t; want the one it recorded", got, ok)
	}
}

// TestStaleReplicaReadsTheLiveWorkloadsGroup: a replica whose cache still shows the deleted
// workload, which never had a ledger, finds the live workload's of its name: the API server
// says which lives, and that one's ledger is the group's (never marked superseded by the
// deleted one's). Without a live workload of the name, its own ledger is read.
func TestStaleReplicaReadsTheLiveWorkloadsGroup(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	a, b := replicas(store)
	live := agentGroup
	live.UID = "9e8d7c6b-0000-4000-8000-0000000000aa"
	g, err := b.ReadGroup(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RecordEviction(ctx, b, evictions[0], budget.MinRetention); err != nil {
		t.Fatal(err)
	}
	// No workload of the name lives: the deleted one's own (empty) ledger.
	if g, err = a.ReadGroup(ctx, agentGroup); err != nil || len(g.Records) != 1 {
		t.Fatalf("with no live workload: records %v, %v; want the other ledger's one, merged", g.Records, err)
	}
	store.Put(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: live.Namespace, Name: live.Name, UID: live.UID}})
	if g, err = a.ReadGroup(ctx, agentGroup); err != nil {
		t.Fatal(err)
	}
	if err := g.RecordEviction(ctx, a, evictions[1], budget.MinRetention); err != nil {
		t.Fatal(err)
	}
	if got := storedLease(t, store, budget.GroupKey(ns, live.UID)); got.Annotations[budget.SupersededAnnotation] != "" ||
		!strings.Contains(got.Annotations[budget.EvictionsAnnotation], string(evictions[1].UID)) {
		t.Errorf("the live workload's ledger: %v; want the stale replica's record in it, not superseded", got.Annotations)
	}
	if err := store.Get(ctx, budget.GroupKey(ns, agent), &coordinationv1.Lease{}); err == nil {
		t.Error("the stale replica wrote a ledger of the deleted workload")
	}
}

// TestReadsANewerReleasesGroupLedger: records with fields this release does not know (a
// newer release's additive change) read as the fields it knows.
func TestReadsANewerReleasesGroupLedger(t *testing.T) {
	store, _ := previousLease(t, "group-lease.json", func(l *coordinationv1.Lease) {
		for _, k := range []string{"holdfast.dev/evictions", "holdfast.dev/rollout-start"} {
			l.Annotations[k] = strings.ReplaceAll(l.Annotations[k], `"by":`, `"reason":{"kind":"NodeDrain"},"by":`)
		}
	})
	a, _ := replicas(store)
	groupAsWritten(t, a)
}

// TestReadsThePreviousReleasesFleetLedger: a fleet ledger release 5648181 wrote is the one
// this release reads for the policy (same name), its starts read as written, and this
// release's next start keeps the other workloads' starts and the policy's ownership.
func TestReadsThePreviousReleasesFleetLedger(t *testing.T) {
	ctx := context.Background()
	store, prev := previousLease(t, "fleet-lease.json", nil)
	a, _ := replicas(store)
	f, err := a.ReadFleet(ctx, policy)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(starts, f.Records); diff != "" {
		t.Errorf("starts (-written +read):\n%s", diff)
	}

	// The agents' next start, a minute after the other workload's, which has not lapsed.
	next := budget.Start{Workload: "DaemonSet kube-system/konnectivity-agent", Template: strings.Repeat("e", 64), At: starts[1].At.Add(time.Minute), By: replicaA}
	if err := f.RecordStart(ctx, a, next); err != nil {
		t.Fatalf("writing over the previous release's ledger: %v", err)
	}
	if f, err = a.ReadFleet(ctx, policy); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]budget.Start{starts[1], next}, f.Records); diff != "" {
		t.Errorf("starts after this release's write (-want +got):\n%s", diff)
	}
	if got := storedLease(t, store, budget.StartsKey(ns, policy.Name)); !cmp.Equal(got.OwnerReferences, prev.OwnerReferences) {
		t.Errorf("owners became %v", got.OwnerReferences)
	}
}

// TestReadsANewerReleasesFleetLedger: start records with fields this release does not know
// read as the fields it knows.
func TestReadsANewerReleasesFleetLedger(t *testing.T) {
	store, _ := previousLease(t, "fleet-lease.json", func(l *coordinationv1.Lease) {
		l.Annotations["holdfast.dev/starts"] = strings.ReplaceAll(l.Annotations["holdfast.dev/starts"], `"by":`, `"revision":12,"by":`)
	})
	a, _ := replicas(store)
	f, err := a.ReadFleet(context.Background(), policy)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(starts, f.Records); diff != "" {
		t.Errorf("starts (-written +read):\n%s", diff)
	}
}

// TestSweepsThePreviousReleasesLedgers: this release's leader deletes the previous
// release's idle group ledgers, by their label, name and last write (the renew time, or
// the creation without one), and leaves its fleet ledgers, which go with their policies.
func TestSweepsThePreviousReleasesLedgers(t *testing.T) {
	store, _ := previousLease(t, "group-lease.json", nil)
	fleet := &coordinationv1.Lease{}
	golden.Load(t, "testdata/previous/fleet-lease.json", fleet)
	store.Put(fleet)
	// A group ledger without a renew time, created 30 minutes before the sweep: kept.
	created := &coordinationv1.Lease{}
	golden.Load(t, "testdata/previous/group-lease.json", created)
	created.Name, created.UID, created.Spec.RenewTime = budget.GroupPrefix+"another-workload", "another-lease", nil
	created.CreationTimestamp = metav1.NewTime(t0.Add(90 * time.Minute))
	store.Put(created)

	a, _ := replicas(store)
	deleted, err := a.Sweep(context.Background(), budget.MinRetention, t0.Add(2*time.Hour))
	if err != nil || deleted != 1 {
		t.Fatalf("Sweep = %d, %v; want the idle group ledger deleted", deleted, err)
	}
	for _, key := range []client.ObjectKey{budget.StartsKey(ns, policy.Name), budget.GroupKey(ns, "another-workload")} {
		if err := store.Get(context.Background(), key, &coordinationv1.Lease{}); err != nil {
			t.Errorf("%s: %v", key.Name, err)
		}
	}
}

// TestAddedRecordFieldsStoredForm pins each field this release adds to a record of the
// group's ledger: an admitted pod DELETE ("via":"delete"), an eviction released after
// maxHold ("released":true), the pod's topology domains and the pods serving there. A replica of the previous
// release (release 5648181), which decodes a record into pod, uid, at and by, counts each
// as an eviction during an upgrade, and this release reads each back as written.
func TestAddedRecordFieldsStoredForm(t *testing.T) {
	const stored = `[{"pod":"konnectivity-agent-7xq2d","uid":"1c2d3e4f-0000-4000-8000-00000000a001","at":"2026-11-30T12:00:00.123456789Z","by":"holdfast-6f9c7d8b5-2xk4p",`
	for name, c := range map[string]struct {
		add   func(*budget.Eviction)
		added string
	}{
		"a delete":            {add: func(r *budget.Eviction) { r.Via = budget.ViaDelete }, added: `"via":"delete"}]`},
		"a released eviction": {add: func(r *budget.Eviction) { r.Released = true }, added: `"released":true}]`},
		"the pod's domains": {add: func(r *budget.Eviction) {
			r.Domains = map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"}
		}, added: `"domains":{"topology.kubernetes.io/zone":"eu-west-1a"}}]`},
		"the pods serving in its domains": {add: func(r *budget.Eviction) {
			r.Domains = map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"}
			r.Serving = map[string]int32{"topology.kubernetes.io/zone": 3}
		}, added: `"domains":{"topology.kubernetes.io/zone":"eu-west-1a"},"serving":{"topology.kubernetes.io/zone":3}}]`},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := memstore.New(nil)
			a, _ := replicas(store)
			g, err := a.ReadGroup(ctx, agentGroup)
			if err != nil {
				t.Fatal(err)
			}
			rec := budget.Eviction{Pod: "konnectivity-agent-7xq2d", UID: "1c2d3e4f-0000-4000-8000-00000000a001", At: t0, By: replicaA}
			c.add(&rec)
			if err := g.RecordEviction(ctx, a, rec, budget.MinRetention); err != nil {
				t.Fatal(err)
			}
			raw := storedLease(t, store, budget.GroupKey(ns, agent)).Annotations[budget.EvictionsAnnotation]
			if want := stored + c.added; raw != want {
				t.Errorf("stored records:\n got %s\nwant %s", raw, want)
			}
			// The previous release's record type, decoded as it decodes it.
			var previous []struct {
				Pod string    `json:"pod"`
				UID types.UID `json:"uid"`
				At  time.Time `json:"at"`
				By  string    `json:"by,omitempty"`
			}
			if err := json.Unmarshal([]byte(raw), &previous); err != nil || len(previous) != 1 || previous[0].UID != rec.UID || !previous[0].At.Equal(t0) {
				t.Errorf("the previous release reads %+v (%v), want the record as an eviction", previous, err)
			}
			if g, err = a.ReadGroup(ctx, agentGroup); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]budget.Eviction{rec}, g.Records); diff != "" {
				t.Errorf("records read back (-want +got):\n%s", diff)
			}
		})
	}
}
