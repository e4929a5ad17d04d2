// Package journal keeps the revision journal: for each guarded workload, the pod
// templates that became its current one, when, when their rollouts finished, and how
// their rollouts progressed. The cluster's own history cannot say when a revision became
// current (a rollback renumbers a ReplicaSet that may be days old) nor keep "finished"
// once a pod is lost later; the journal does.
//
// The leader's JournalRecorder (internal/controller) writes one ConfigMap per workload in
// holdfast's namespace; every replica reads them from its cache (Store). A decision reads
// a workload's journal through View, which fills in what the journal has not recorded
// yet, always on the side of caution.
package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Labels and keys of the journal's ConfigMaps.
const (
	ComponentLabel = "app.kubernetes.io/component"
	Component      = "revision-journal"
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "holdfast"
	dataKey        = "journal"
	// observedKey holds Observed, apart from the journal's own JSON: a release before it
	// refuses a field it does not know in dataKey, and reads other keys not at all.
	observedKey = "observed"
	// writersKey holds each revision's Writer, apart from dataKey for the same reason.
	writersKey = "writers"
	// servedKey records that the workload has served ("true"), apart from dataKey for the
	// same reason: it outlives the revisions that showed it (MaxRevisions trims them).
	servedKey = "served"
	// minReadyKey holds MinReadySeconds (a decimal), apart from dataKey for the same reason.
	minReadyKey = "min-ready-seconds"
	// nodesKey holds Observed.Nodes (a decimal), apart from observedKey, which a release
	// before it reads strictly too.
	nodesKey = "daemon-nodes"
	// lineageKey holds Observed.Previous and Observed.Settled (JSON), apart from
	// observedKey, which a release before it reads strictly too.
	lineageKey = "lineage"
	// MaxRevisions is how many revisions a journal keeps: enough for I3's returns.
	MaxRevisions = 8
)

// Revision is a pod template that became the workload's current one.
type Revision struct {
	// Template is the template's fingerprint (workload.Template.Sum).
	Template string `json:"template"`
	// Shape is the fingerprint with the argsMatchReplicas flags blanked
	// (workload.Template.Shape); a change to a template of the same shape is a scale, which
	// keeps the revision's times. Empty when no policy has such flags.
	Shape string `json:"shape,omitempty"`
	// Since is when the template became current, as the leader observed it.
	Since time.Time `json:"since"`
	// Until is when another template replaced it; nil for the current one.
	Until *time.Time `json:"until,omitempty"`
	// Finished is when its rollout finished; sticky until the template changes.
	Finished *time.Time `json:"finished,omitempty"`
	// Available is the most pods of the revision seen available at once, and Progressed
	// when that number last rose or the workload's hold on its rollout was lifted: the
	// stall clock (settle.stallAfter) runs from Progressed.
	Available  int32     `json:"available"`
	Progressed time.Time `json:"progressed"`
	// Writer is the field manager that last changed the workload's template when the
	// leader saw this one become current (informer.Writers); "" when unknown. It is kept
	// under its own key of the ConfigMap (writersKey), as Observed is.
	Writer string `json:"-"`
	// Pending marks a revision a decision assumed and the journal has not recorded (View);
	// Lagging one the journal recorded, whose workload changed since the journal looked.
	Pending bool `json:"-"`
	Lagging bool `json:"-"`
}

// Journal is one workload's revision journal.
type Journal struct {
	Kind      v1alpha1.WorkloadKind `json:"kind"`
	Namespace string                `json:"namespace"`
	Name      string                `json:"name"`
	// UID and Generation are of the object the journal last observed: a journal observed
	// the spec of a request's old object when both match.
	UID        types.UID `json:"uid"`
	Generation int64     `json:"generation"`
	// Held is a workload whose controller rolls nothing out now (workload.Rollout.Held).
	Held bool `json:"held,omitempty"`
	// Deleted is when the workload was seen gone; the journal is kept for Retention after
	// it, so that a delete and re-create finds it.
	Deleted *time.Time `json:"deleted,omitempty"`
	// Revisions are oldest first; the last is the current one.
	Revisions []Revision `json:"revisions"`
	// Observed is what the leader last saw in kube's own terms; nil in a journal a release
	// before it wrote (it keeps no such key, and drops it when it writes).
	Observed *Observed `json:"-"`
	// ServedBefore is a journal whose ConfigMap records that the workload served
	// (servedKey): a revision showed it before MaxRevisions trimmed it away.
	ServedBefore bool `json:"-"`
	// MinReadySeconds is the workload's spec.minReadySeconds when last observed
	// (minReadyKey): no pod of its rollout counts as available sooner, so its stall clock
	// waits that much longer (StallAfter). 0 in a journal a release before it wrote.
	MinReadySeconds int32 `json:"-"`
}

// StallAfter is how long the journal's rollout goes without progress, under s, before it
// counts as stalled, for what a stall releases (a fleet slot, the group's drains): the
// rule's stallAfter and the workload's minReadySeconds, which the workload's owner sets,
// at most the rule's stallAfter again (an unbounded one would hold both for good). A nil
// journal adds nothing.
func (j *Journal) StallAfter(s *v1alpha1.SettleRule) time.Duration {
	after := StallAfter(s)
	if j != nil {
		after += min(time.Duration(j.MinReadySeconds)*time.Second, after)
	}
	return after
}

// Observed is what the journal records of the workload in kube's own terms, kept under its
// own key of the ConfigMap so that the previous release, which does not know it, still
// reads the journal, and a journal that release wrote (without it) reads as it meant.
type Observed struct {
	// Revision is the newest revision number the leader saw (a ReplicaSet's
	// deployment.kubernetes.io/revision, a ControllerRevision's revision), and Template the
	// fingerprint of the template it numbers. kube numbers a template each time it becomes
	// current, a return included: a number above Revision is a change the journal may not
	// have recorded (missed).
	Revision int64  `json:"revision"`
	Template string `json:"template,omitempty"`
	// Updated is, for a DaemonSet, the most pods of the current revision seen available at
	// once on the nodes that had joined when it became current (its rollout's progress,
	// history.Revision.ServingBefore): its stall clock restarts only when that rises. A
	// journal without it counts all of them (Available), as the previous release did.
	Updated int32 `json:"updated,omitempty"`
	// Nodes is, for a DaemonSet, how many of the nodes that had joined when the current
	// revision became current were there when Updated was measured (nodesKey): fewer now,
	// and the pods they served are gone, not undone, so Updated is lowered to what the
	// others serve rather than waited for again. 0 when not measured (a journal the
	// previous release wrote, which drops the key).
	Nodes int32 `json:"-"`
	// Previous is the UID of the workload of the name this one was created in place of,
	// as the leader saw one give way to the other (the journal's UID before this one), and
	// PreviousSince when it saw it; Settled is whether the leader has seen this one rolled
	// out since, on one template: its controller acted on its spec, and no pod of another
	// template was left (Replaced). Kept under lineageKey until every start of the previous
	// object has lapsed; empty in a journal a release before it wrote, which drops the key.
	Previous      types.UID `json:"-"`
	PreviousSince time.Time `json:"-"`
	Settled       bool      `json:"-"`
}

// lineage is what lineageKey holds.
type lineage struct {
	Previous types.UID `json:"previous"`
	Since    time.Time `json:"since"`
	Settled  bool      `json:"settled,omitempty"`
}

// Replaces is whether the journal is of a live workload, not held, that was created in
// place of the object uid and has settled since (Observed.Replaced): a start admitted for
// that object holds nothing now, of the fleet or of its group's evictions.
func (j *Journal) Replaces(uid types.UID) bool {
	return j != nil && j.Deleted == nil && !j.Held && j.Observed.Replaced(uid)
}

// Replaced is whether the workload the journal observes was created in place of the
// object uid, and the leader has seen it settled since (Previous, Settled): that object is
// gone, and what it had begun to roll out has no pod left that the workload keeps.
func (o *Observed) Replaced(uid types.UID) bool {
	return o != nil && uid != "" && o.Previous == uid && o.Settled
}

// Ref is the workload the journal is of.
func (j *Journal) Ref() workload.Ref {
	return workload.Ref{Kind: j.Kind, Namespace: j.Namespace, Name: j.Name, UID: j.UID}
}

// Current is the current revision, nil when none is known.
func (j *Journal) Current() *Revision {
	if j == nil || len(j.Revisions) == 0 {
		return nil
	}
	return &j.Revisions[len(j.Revisions)-1]
}

// Rolling is the current revision while its rollout is unfinished on a workload neither
// held nor deleted (one that takes pods down now), nil otherwise or without a journal.
func (j *Journal) Rolling() *Revision {
	cur := j.Current()
	if cur == nil || cur.Finished != nil || j.Held || j.Deleted != nil {
		return nil
	}
	return cur
}

// Name is the name of a workload's journal ConfigMap: the kind and a hash of the
// namespace and name, so that any workload's journal has a valid, short name.
func Name(kind v1alpha1.WorkloadKind, namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "holdfast-journal-" + strings.ToLower(string(kind)) + "-" + hex.EncodeToString(sum[:10])
}

// ErrInvalid marks a journal that does not decode or does not describe its workload:
// edited by hand, or corrupt. It is read as absent, never as permission.
var ErrInvalid = errors.New("invalid revision journal")

// Encode is the journal as its ConfigMap in namespace.
func Encode(j *Journal, namespace string) (*corev1.ConfigMap, error) {
	raw, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name(j.Kind, j.Namespace, j.Name),
			Labels: map[string]string{ComponentLabel: Component, ManagedByLabel: ManagedBy}},
		Data: map[string]string{dataKey: string(raw)},
	}
	if j.Observed != nil {
		o, err := json.Marshal(j.Observed)
		if err != nil {
			return nil, err
		}
		cm.Data[observedKey] = string(o)
	}
	if j.Served() {
		cm.Data[servedKey] = "true"
	}
	if j.MinReadySeconds > 0 {
		cm.Data[minReadyKey] = strconv.Itoa(int(j.MinReadySeconds))
	}
	if j.Observed != nil && j.Observed.Nodes > 0 {
		cm.Data[nodesKey] = strconv.Itoa(int(j.Observed.Nodes))
	}
	if j.Observed != nil && j.Observed.Previous != "" {
		l, err := json.Marshal(lineage{Previous: j.Observed.Previous, Since: j.Observed.PreviousSince, Settled: j.Observed.Settled})
		if err != nil {
			return nil, err
		}
		cm.Data[lineageKey] = string(l)
	}
	var ws []written
	for _, r := range j.Revisions {
		if r.Writer != "" {
			ws = append(ws, written{Template: r.Template, Since: r.Since, Writer: r.Writer})
		}
	}
	if len(ws) > 0 {
		w, err := json.Marshal(ws)
		if err != nil {
			return nil, err
		}
		cm.Data[writersKey] = string(w)
	}
	// Never write what the readers would take as absent and the recorder rebuild: each
	// rebuild would write it again, in a loop.
	if _, err := Decode(cm); err != nil {
		return nil, fmt.Errorf("not writing a journal that would be read back as invalid: %w", err)
	}
	return cm, nil
}

// written is a revision's Writer as writersKey keeps it: the revision is the one with the
// template that became current at since, so that a journal written by a release that
// drops the key, or trims revisions, never lends a writer to another revision.
type written struct {
	Template string    `json:"template"`
	Since    time.Time `json:"since"`
	Writer   string    `json:"writer"`
}

// maxWriter is the longest field manager name the API server accepts.
const maxWriter = 128

// decodeWriters sets the Writer of each revision writersKey names; entries of revisions
// the journal no longer has are dropped.
func (j *Journal) decodeWriters(raw string) error {
	var ws []written
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ws); err != nil {
		return err
	}
	for _, w := range ws {
		if w.Writer == "" || len(w.Writer) > maxWriter {
			return fmt.Errorf("a writer of %d characters, want 1 to %d", len(w.Writer), maxWriter)
		}
		for i := range j.Revisions {
			if r := &j.Revisions[i]; r.Template == w.Template && r.Since.Equal(w.Since) {
				r.Writer = w.Writer
			}
		}
	}
	return nil
}

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Decode reads a journal from its ConfigMap and checks that it is one holdfast wrote:
// it names the workload its ConfigMap is named for, its revisions are in order, each
// but the current one ended, and their fingerprints are fingerprints. Otherwise the
// error wraps ErrInvalid.
func Decode(cm *corev1.ConfigMap) (*Journal, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %s/%s: %s", ErrInvalid, cm.Namespace, cm.Name, fmt.Sprintf(format, args...))
	}
	raw, ok := cm.Data[dataKey]
	if !ok {
		return nil, invalid("no %q key", dataKey)
	}
	j := &Journal{}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(j); err != nil {
		return nil, invalid("%v", err)
	}
	if o, ok := cm.Data[observedKey]; ok {
		j.Observed = &Observed{}
		dec := json.NewDecoder(strings.NewReader(o))
		dec.DisallowUnknownFields()
		if err := dec.Decode(j.Observed); err != nil {
			return nil, invalid("%s: %v", observedKey, err)
		}
		if j.Observed.Revision < 0 || j.Observed.Updated < 0 || (j.Observed.Template != "" && !fingerprintRE.MatchString(j.Observed.Template)) {
			return nil, invalid("%s: a negative number or no template fingerprint", observedKey)
		}
	}
	if v, ok := cm.Data[servedKey]; ok {
		if v != "true" {
			return nil, invalid("%s: %q, want \"true\"", servedKey, v)
		}
		j.ServedBefore = true
	}
	if v, ok := cm.Data[minReadyKey]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return nil, invalid("%s: %q, want a positive number of seconds", minReadyKey, v)
		}
		j.MinReadySeconds = int32(n)
	}
	if v, ok := cm.Data[nodesKey]; ok && j.Observed != nil {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return nil, invalid("%s: %q, want a positive number of nodes", nodesKey, v)
		}
		j.Observed.Nodes = int32(n)
	}
	if v, ok := cm.Data[lineageKey]; ok && j.Observed != nil {
		// Read leniently: a value this release cannot read (a later release's) is no
		// lineage, which only keeps a replaced object's start until it lapses; the journal
		// itself stays valid.
		var l lineage
		if err := json.Unmarshal([]byte(v), &l); err == nil && l.Previous != "" {
			j.Observed.Previous, j.Observed.PreviousSince, j.Observed.Settled = l.Previous, l.Since, l.Settled
		}
	}
	if w, ok := cm.Data[writersKey]; ok {
		if err := j.decodeWriters(w); err != nil {
			return nil, invalid("%s: %v", writersKey, err)
		}
	}
	if cm.Name != Name(j.Kind, j.Namespace, j.Name) {
		return nil, invalid("it describes %s %s/%s, whose journal has another name", j.Kind, j.Namespace, j.Name)
	}
	if len(j.Revisions) == 0 || len(j.Revisions) > MaxRevisions {
		return nil, invalid("%d revisions, want 1 to %d", len(j.Revisions), MaxRevisions)
	}
	for i, r := range j.Revisions {
		last := i == len(j.Revisions)-1
		switch {
		case !fingerprintRE.MatchString(r.Template) || (r.Shape != "" && !fingerprintRE.MatchString(r.Shape)):
			return nil, invalid("revision %d has no template fingerprint", i)
		case r.Since.IsZero():
			return nil, invalid("revision %d has no time it became current", i)
		case !last && (r.Until == nil || r.Until.Before(r.Since) || j.Revisions[i+1].Since.Before(*r.Until)):
			return nil, invalid("revision %d ends before it starts or after its successor", i)
		case last && r.Until != nil:
			return nil, invalid("the current revision has ended")
		case r.Finished != nil && r.Finished.Before(r.Since):
			return nil, invalid("revision %d finished before it started", i)
		}
	}
	return j, nil
}

// trim keeps the newest MaxRevisions revisions.
func (j *Journal) trim() {
	if n := len(j.Revisions); n > MaxRevisions {
		j.Revisions = slices.Delete(j.Revisions, 0, n-MaxRevisions)
	}
}
