package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/ledger"
)

// The ledger of a group is a Lease named GroupPrefix + the workload's UID. Its
// EvictionsAnnotation lists the evictions holdfast admitted in the group; its
// RolloutStartAnnotation holds the last start of the workload's rollout that shares a
// DisruptionPolicy's budget, written into the same Lease so that a drain and a rollout
// admitted at once by two replicas conflict, and the second decides again. Its
// WorkloadLabel and WorkloadAnnotation name the workload by kind, namespace and name, so
// that a workload created again under its name (a new UID, over the pods an orphaning
// delete left or in place of those a cascading one took) reads the records of the ones
// before it: the same name's pods were disrupted, whichever object owned them.
const (
	GroupPrefix            = "holdfast-evictions-"
	EvictionsAnnotation    = "holdfast.dev/evictions"
	RolloutStartAnnotation = "holdfast.dev/rollout-start"
	// WorkloadLabel is a digest of the workload's kind, namespace and name (a label value
	// holds at most 63 characters); WorkloadAnnotation is them in full (GroupID.String),
	// which tells a digest's collision apart.
	WorkloadLabel      = "holdfast.dev/workload"
	WorkloadAnnotation = "holdfast.dev/workload"
	// MinRetention is the least time a group's ledger keeps its records (Retention).
	MinRetention = time.Hour
	// maxEvictions bounds the records one ledger keeps.
	maxEvictions = 64
)

// Eviction is one eviction holdfast admitted in a group, as the group's ledger records it.
type Eviction struct {
	Pod string    `json:"pod"`
	UID types.UID `json:"uid"`
	At  time.Time `json:"at"`
	// By is the replica that admitted it, whose clock At is read on.
	By string `json:"by,omitempty"`
	// Via is how the pod was taken down: "" an eviction, ViaDelete a DELETE of the pod
	// (DisruptionPolicy guardDeletes). A release that does not know the field reads a
	// delete as an eviction, which counts alike.
	Via string `json:"via,omitempty"`
	// Released marks an eviction admitted because the pod's hold had lasted its policy's
	// maxHold (afterMaxHold Release). A release that does not know the field counts it as
	// any other, which it is for the budget and the cooldown.
	Released bool `json:"released,omitempty"`

	// Domains are the pod's topology domains when it was admitted down: its node's value of
	// each topologyBudget key of the policies that applied (DisruptionPolicy
	// topologyBudget), by key; "" for a node without the key or with it empty. Kept in the
	// record because the node may be gone by the time the domain is counted; a key missing
	// here was not read (Disrupted, NotRecorded). A release that does not know the field
	// ignores it.
	Domains map[string]string `json:"domains,omitempty"`
	// Serving is, by topologyBudget key, how many of the group's pods served (Ready, not
	// terminating) in the pod's domain of that key when it was admitted down, this one
	// included: the domain is whole again once as many are available there (Disrupted).
	// A release that does not know the field ignores it, and one that reads a record
	// without it matches a replacement created after the record instead.
	Serving map[string]int32 `json:"serving,omitempty"`
}

// ViaDelete marks a record of an admitted pod DELETE.
const ViaDelete = "delete"

// RolloutStart is a start of a workload's rollout that shares budgets, as its group's
// ledger records it.
type RolloutStart struct {
	Template      string    `json:"template"`
	At            time.Time `json:"at"`
	By            string    `json:"by,omitempty"`
	RolloutPolicy string    `json:"rolloutPolicy"`
	// Budgets are the DisruptionPolicies whose budgets it shares.
	Budgets []string `json:"budgets"`
	// UID and Generation are the object the start was admitted for (its CREATE, or the
	// UPDATE's new object): a journal that has observed it (Observes) decides whether it
	// rolls out. A release that does not know them writes none, and one that does not read
	// them ignores them.
	UID        types.UID `json:"uid,omitempty"`
	Generation int64     `json:"generation,omitempty"`
}

// ObservedBy is whether a journal that last observed the object uid at generation has
// observed the start: the same object, at its generation or a later one. A start recorded
// without them (by an earlier release) is observed once the journal's current template is
// the start's (the caller's check).
func (s RolloutStart) ObservedBy(uid types.UID, generation int64) bool {
	return s.UID == "" || (uid == s.UID && generation >= s.Generation)
}

// GroupKey is the ledger of the group of the workload with this UID.
func GroupKey(namespace string, group types.UID) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: GroupPrefix + string(group)}
}

// GroupID is the workload whose pods a group is: a workload.Ref, which converts to it.
type GroupID struct {
	Kind            v1alpha1.WorkloadKind
	Namespace, Name string
	UID             types.UID
}

// String is the workload's kind, namespace and name, as WorkloadAnnotation holds them.
func (id GroupID) String() string {
	return string(id.Kind) + "/" + id.Namespace + "/" + id.Name
}

// digest is the WorkloadLabel value of the workload's ledgers.
func (id GroupID) digest() string {
	sum := sha256.Sum256([]byte(id.String()))
	return hex.EncodeToString(sum[:20])
}

// Group is one read of a group's ledger, with the records of the ledgers of earlier
// workloads of its name.
type Group struct {
	*ledger.Ledger[Eviction]
	// uid is the workload whose ledger this is (the last of the chain ReadGroup followed).
	uid types.UID
	// earlier are the ledgers of earlier workloads of its name that the next write marks
	// superseded by this one (SupersededAnnotation), as listed: a write to one of them since
	// makes the mark, and so the write, conflict.
	earlier []*coordinationv1.Lease
	// earlierStart is the newest rollout start those earlier ledgers hold, raw.
	earlierStart string
}

// SupersededAnnotation, on a group's ledger, is the UID of the workload of its name created
// after it whose ledger holds its records from then on: a replica whose cache still shows
// the deleted workload reads and writes that one, so that its write and the new
// workload's conflict.
const SupersededAnnotation = "holdfast.dev/superseded-by"

// maxHops bounds the ledgers ReadGroup follows from one superseded to the next.
const maxHops = 8

// ReadGroup reads the ledger of the group of the workload id: by its UID (a missing one is
// empty), or the one that supersedes it, a workload of its name created since. A ledger
// this release has not yet written is read with those that earlier workloads of its kind,
// namespace and name left (one List by WorkloadLabel), whose records count as its own:
// Records holds them all (one per pod, its latest), and the next write keeps them and marks
// those ledgers superseded. An id without a name reads the UID's ledger alone. A ledger an
// earlier release created is not labelled until this release writes it: one a workload
// left while only that release ran is not found.
func (l *Ledgers) ReadGroup(ctx context.Context, id GroupID) (Group, error) {
	return l.readGroup(ctx, id, false)
}

// readGroup is ReadGroup; again is a read of the live workload's group, in place of the
// one asked for.
func (l *Ledgers) readGroup(ctx context.Context, id GroupID, again bool) (Group, error) {
	if id.Name == "" {
		g, err := ledger.Read[Eviction](ctx, l.Live, GroupKey(l.Namespace, id.UID), EvictionsAnnotation)
		return Group{Ledger: g, uid: id.UID}, err
	}
	read, err := l.follow(ctx, &id)
	if err != nil {
		return Group{}, err
	}
	g := Group{Ledger: read, uid: id.UID}
	g.Mark(map[string]string{WorkloadLabel: id.digest()}, map[string]string{WorkloadAnnotation: id.String()})
	if read.Label(WorkloadLabel) == id.digest() {
		return g, nil // this release wrote it, with what the ledgers before it held
	}
	var leases coordinationv1.LeaseList
	if err := l.Live.List(ctx, &leases, client.InNamespace(l.Namespace), client.MatchingLabels{WorkloadLabel: id.digest()}); err != nil {
		return Group{}, fmt.Errorf("reading the eviction ledgers of %s: %w", id, err)
	}
	own := GroupKey(l.Namespace, id.UID).Name
	listed := map[string]bool{}
	others := false
	for i := range leases.Items {
		listed[leases.Items[i].Name] = true
		others = others || (leases.Items[i].Name != own && leases.Items[i].Annotations[WorkloadAnnotation] == id.String())
	}
	if others && !again {
		// Another workload of the name has a ledger: this one may be the deleted one, read
		// through a cache that still shows it. The API server tells which workload of the
		// name lives; its ledger is the group's, so that a stale replica's write and the
		// live workload's conflict there instead of landing in two ledgers.
		live, err := l.LiveUID(ctx, id)
		if err != nil {
			return Group{}, err
		}
		if live != "" && live != id.UID {
			id.UID = live
			return l.readGroup(ctx, id, true)
		}
	}
	var earlier []Eviction
	var latest RolloutStart
	for i := range leases.Items {
		lease := &leases.Items[i]
		next := lease.Annotations[SupersededAnnotation]
		switch {
		case lease.Annotations[WorkloadAnnotation] != id.String(), lease.Name == own:
			continue // another workload's (a digest's collision), or its own
		case next != "" && next != string(id.UID) && listed[GroupKey(l.Namespace, types.UID(next)).Name]:
			continue // its records are in the ledger that superseded it, listed too
		case next != string(id.UID):
			g.earlier = append(g.earlier, lease) // not yet marked superseded by this one
		}
		read, err := ledger.Decode[Eviction](lease, EvictionsAnnotation)
		if err != nil {
			return Group{}, err
		}
		earlier = append(earlier, read.Records...)
		if s, ok := decodeStart(read.Annotation(RolloutStartAnnotation)); ok && s.At.After(latest.At) {
			latest, g.earlierStart = s, read.Annotation(RolloutStartAnnotation)
		}
	}
	if len(earlier) > 0 {
		g.Records = mergeEvictions(g.Records, earlier)
	}
	return g, nil
}

// LiveUID is the UID of the workload of id's kind, namespace and name that the API server
// holds now; "" when there is none.
func (l *Ledgers) LiveUID(ctx context.Context, id GroupID) (types.UID, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(string(id.Kind)))
	if err := l.Live.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, live); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("reading which %s lives: %w", id, err)
		}
		return "", nil
	}
	return live.UID, nil
}

// follow reads the ledger of the workload id, or the one that supersedes it, and so on:
// id's UID becomes the one read. A chain that returns to a ledger it read, or is longer
// than maxHops, stops there.
func (l *Ledgers) follow(ctx context.Context, id *GroupID) (*ledger.Ledger[Eviction], error) {
	seen := map[types.UID]bool{}
	for {
		read, err := ledger.Read[Eviction](ctx, l.Live, GroupKey(l.Namespace, id.UID), EvictionsAnnotation)
		if err != nil {
			return nil, err
		}
		seen[id.UID] = true
		next := types.UID(read.Annotation(SupersededAnnotation))
		if next == "" || seen[next] || len(seen) > maxHops {
			return read, nil
		}
		id.UID = next
	}
}

// write writes records and annotations into the group's ledger, after marking the earlier
// ledgers it read superseded by it; the newest rollout start they held is kept when the
// write records none. An earlier ledger written since it was listed makes the write a
// conflict (decide again on a fresh read); one deleted since (the sweep) is skipped.
func (g Group) write(ctx context.Context, l *Ledgers, records []Eviction, annotations map[string]string, at time.Time) error {
	for _, e := range g.earlier {
		marked := e.DeepCopy()
		marked.Annotations[SupersededAnnotation] = string(g.uid)
		if err := l.Live.Update(ctx, marked); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	// A write that records a start keeps it, whatever the clocks of the earlier ledgers'
	// writers said; any other keeps the earlier start when it is newer than this ledger's.
	if _, set := annotations[RolloutStartAnnotation]; !set {
		if e, ok := decodeStart(g.earlierStart); ok {
			if own, has := decodeStart(g.Annotation(RolloutStartAnnotation)); !has || e.At.After(own.At) {
				annotations = maps.Clone(annotations)
				if annotations == nil {
					annotations = map[string]string{}
				}
				annotations[RolloutStartAnnotation] = g.earlierStart
			}
		}
	}
	return g.WriteWith(ctx, l.Live, records, annotations, l.Identity, at)
}

// mergeEvictions is the records of both lists, one per pod (its latest), oldest first, and
// at most the newest maxEvictions, as a write keeps them (AppendEviction).
func mergeEvictions(own, earlier []Eviction) []Eviction {
	all := slices.Concat(earlier, own)
	slices.SortStableFunc(all, func(a, b Eviction) int { return a.At.Compare(b.At) })
	latest := map[types.UID]int{}
	for i, r := range all {
		latest[r.UID] = i
	}
	out := all[:0]
	for i, r := range all {
		if latest[r.UID] == i {
			out = append(out, r)
		}
	}
	if len(out) > maxEvictions {
		out = out[len(out)-maxEvictions:]
	}
	return out
}

// RolloutStart is the group's last recorded start of a rollout that shares its budget (an
// earlier workload's of its name when that is newer); ok is false when there is none or it
// does not decode.
func (g Group) RolloutStart() (s RolloutStart, ok bool) {
	s, ok = decodeStart(g.Annotation(RolloutStartAnnotation))
	if e, eok := decodeStart(g.earlierStart); eok && (!ok || e.At.After(s.At)) {
		return e, true
	}
	return s, ok
}

func decodeStart(raw string) (s RolloutStart, ok bool) {
	if raw == "" || json.Unmarshal([]byte(raw), &s) != nil {
		return RolloutStart{}, false
	}
	return s, true
}

// RecordEviction writes the group's records with rec, keeping those not older than keep
// before it (one per pod: its latest admitted eviction, and at most the newest 64). A
// conflict means another replica wrote first: the caller decides again on a fresh read.
func (g Group) RecordEviction(ctx context.Context, l *Ledgers, rec Eviction, keep time.Duration) error {
	return g.write(ctx, l, AppendEviction(g.Records, rec, keep), nil, rec.At)
}

// AppendEviction is records with rec appended, without those older than keep before rec
// or of the same pod, and at most the newest maxEvictions.
func AppendEviction(records []Eviction, rec Eviction, keep time.Duration) []Eviction {
	out := slices.DeleteFunc(slices.Clone(records), func(r Eviction) bool { return rec.At.Sub(r.At) > keep || r.UID == rec.UID })
	out = append(out, rec)
	if len(out) > maxEvictions {
		out = out[len(out)-maxEvictions:]
	}
	return out
}

// RecordRolloutStart writes s into the group's ledger, keeping its evictions: an eviction
// admitted meanwhile makes the write conflict (and the start is decided again), and an
// eviction decided after it sees the start.
func (g Group) RecordRolloutStart(ctx context.Context, l *Ledgers, s RolloutStart) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return g.write(ctx, l, g.Records, map[string]string{RolloutStartAnnotation: string(raw)}, s.At)
}

// Retention is how long a group's ledger keeps its records: longer than any cooldown the
// policies set, and than any topologyBudget's replacementTimeout (a record disrupts its
// domain until then: dropped sooner, a domain whose pod is not replaced would free before
// its bound), with the margins a record may need, and never less than MinRetention.
func Retention(policies []v1alpha1.DisruptionPolicy) time.Duration {
	keep := MinRetention
	for i := range policies {
		if c := policies[i].Spec.Cooldown; c != nil {
			keep = max(keep, c.Duration+EvictionLapse+MaxClockSkew)
		}
		if tb := policies[i].Spec.TopologyBudget; tb != nil {
			_, _, bound := tb.Resolved()
			keep = max(keep, bound+MaxClockSkew)
		}
	}
	return keep
}
