package journal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Metrics counts what the journal's readers and writer found.
type Metrics struct {
	invalid, rebuilds, unwritable prometheus.Counter
}

// NewMetrics registers the journal's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdfast_journal_invalid_total",
			Help: "Revision journals read that did not decode or did not describe their workload (edited by hand, corrupt); each was read as absent.",
		}),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdfast_journal_rebuilds_total",
			Help: "Revision journals the leader replaced or deleted because they read as invalid; a journal it wrote and rebuilt again is a write loop.",
		}),
		unwritable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "holdfast_journal_unwritable_total",
			Help: "Revision journals the leader did not write because they would read as invalid; the workload keeps the journal it had, or none, until its next change.",
		}),
	}
	for _, c := range []prometheus.Collector{m.invalid, m.rebuilds, m.unwritable} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Invalid counts one invalid journal read; a nil Metrics counts nothing.
func (m *Metrics) Invalid() {
	if m != nil {
		m.invalid.Inc()
	}
}

// Rebuilt counts one invalid journal the leader replaced or deleted; a nil Metrics counts
// nothing.
func (m *Metrics) Rebuilt() {
	if m != nil {
		m.rebuilds.Inc()
	}
}

// Unwritable counts one journal the leader did not write because it would read as
// invalid; a nil Metrics counts nothing.
func (m *Metrics) Unwritable() {
	if m != nil {
		m.unwritable.Inc()
	}
}

// Store holds the decoded journals of holdfast's cache, so that a decision reads a
// journal without copying or decoding it: an informer on the journals' ConfigMaps feeds
// it (Handler), decoding each version once. An invalid journal is counted and logged as
// it is stored, and read as absent.
type Store struct {
	// Metrics counts invalid journals; nil counts nothing.
	Metrics *Metrics
	// Log reports invalid journals; the zero Logger reports nothing.
	Log logr.Logger

	mu       sync.RWMutex
	journals map[workloadKey]*Journal
	byName   map[string]workloadKey
}

type workloadKey struct {
	kind            v1alpha1.WorkloadKind
	namespace, name string
}

// Get returns the workload's journal, nil when there is none or it is invalid. A nil
// Store has no journals.
func (s *Store) Get(kind v1alpha1.WorkloadKind, namespace, name string) *Journal {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.journals[workloadKey{kind, namespace, name}]
}

// Add stores a journal's ConfigMap, replacing what its name held.
func (s *Store) Add(cm *corev1.ConfigMap) {
	j, err := Decode(cm)
	if err != nil {
		s.Metrics.Invalid()
		s.Log.Error(err, "Reading a revision journal as absent until the leader rebuilds it")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journals == nil {
		s.journals, s.byName = map[workloadKey]*Journal{}, map[string]workloadKey{}
	}
	if k, ok := s.byName[cm.Name]; ok {
		delete(s.journals, k)
		delete(s.byName, cm.Name)
	}
	if err == nil {
		k := workloadKey{j.Kind, j.Namespace, j.Name}
		s.journals[k], s.byName[cm.Name] = j, k
	}
}

// ReadStore lists the revision journals in holdfast's namespace from r into a Store, as the
// cache's informer feeds the webhook's: for tools that read a cluster once (holdfast check
// --cluster).
func ReadStore(ctx context.Context, r client.Reader, namespace string) (*Store, error) {
	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.InNamespace(namespace), client.MatchingLabels{ComponentLabel: Component}); err != nil {
		return nil, fmt.Errorf("listing the revision journals in %s: %w", namespace, err)
	}
	s := &Store{}
	for i := range cms.Items {
		s.Add(&cms.Items[i])
	}
	return s, nil
}

// Delete forgets a journal.
func (s *Store) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.byName[name]; ok {
		delete(s.journals, k)
		delete(s.byName, name)
	}
}

// Handler is the informer event handler that feeds the store.
func (s *Store) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.add(obj) },
		UpdateFunc: func(_, obj any) { s.add(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				s.Delete(cm.Name)
			}
		},
	}
}

func (s *Store) add(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[ComponentLabel] == Component {
		s.Add(cm)
	}
}

// StalledMark ends the name of a workload whose unfinished rollout has stalled.
const StalledMark = " (stalled)"

// Slot is a workload's hold on a fleet limit's slot (rules.concurrency): its rollout is
// unfinished as its journal recorded it (not finished, not held, not deleted) and it has
// served (Journal.Served).
type Slot struct {
	Ref workload.Ref
	// Stalled is a rollout without progress for stallAfter; Released one stalled for longer
	// than the slot lifetime after that, which no longer holds its slot.
	Stalled, Released bool
	// StalledSince is when it stalled (its last progress plus stallAfter).
	StalledSince time.Time
}

// Name is the slot's workload as messages and statuses name it (kind namespace/name),
// marked when stalled.
func (s Slot) Name() string {
	if s.Stalled {
		return s.Ref.String() + StalledMark
	}
	return s.Ref.String()
}

// Slots lists the slots the workloads among refs hold or held: each with an unfinished
// rollout that has served; it stalls stallAfter (and its workload's minReadySeconds, at
// most stallAfter again) after its last progress. A stalled one is Released once lifetime has passed since it
// stalled; lifetime 0 never releases it.
func (s *Store) Slots(refs []workload.Ref, stallAfter, lifetime time.Duration, now time.Time) []Slot {
	return slots(s, refs, stallAfter, lifetime, now)
}

// Reader reads a workload's journal: a Store, or a Once of one.
type Reader interface {
	Get(kind v1alpha1.WorkloadKind, namespace, name string) *Journal
}

func slots(r Reader, refs []workload.Ref, stallAfter, lifetime time.Duration, now time.Time) []Slot {
	var out []Slot
	for _, w := range refs {
		j := r.Get(w.Kind, w.Namespace, w.Name)
		cur := j.Rolling()
		if cur == nil || !j.Served() {
			continue
		}
		// A workload's minReadySeconds delays its progress, at most by stallAfter again
		// (Journal.StallAfter).
		slot := Slot{Ref: w, StalledSince: cur.Progressed.Add(stallAfter + min(time.Duration(j.MinReadySeconds)*time.Second, stallAfter))}
		slot.Stalled = !now.Before(slot.StalledSince)
		slot.Released = slot.Stalled && lifetime > 0 && now.Sub(slot.StalledSince) >= lifetime
		out = append(out, slot)
	}
	return out
}

// Served is whether the journal's workload has ever served: a revision whose rollout
// finished, or with a pod seen available, now or when the journal was last written (so
// eight failed releases that trim the last finished revision away do not make a serving
// workload look new). A workload whose pods never became available (created with an image
// that never starts) disrupts nothing by rolling out.
func (j *Journal) Served() bool {
	if j == nil {
		return false
	}
	if j.ServedBefore {
		return true
	}
	for i := range j.Revisions {
		if r := &j.Revisions[i]; r.Finished != nil || r.Available > 0 {
			return true
		}
	}
	return false
}

// FleetSlots are the slots the workloads among refs hold or held under the policy's fleet
// limit: Slots with its settle.stallAfter and concurrency.stalledSlotLifetime.
func (s *Store) FleetSlots(p *v1alpha1.RolloutPolicy, refs []workload.Ref, now time.Time) []Slot {
	return fleetSlots(s, p, refs, now)
}

func fleetSlots(r Reader, p *v1alpha1.RolloutPolicy, refs []workload.Ref, now time.Time) []Slot {
	return slots(r, refs, StallAfter(p.Spec.Rules.Settle), SlotLifetime(p.Spec.Rules.Concurrency), now)
}

// Once reads each workload's journal from a Store at most once, as it was then: a decision
// that reads a journal twice (a fleet's slots, then the starts its ledger records) reads the
// same one, though the leader writes it in between. Read twice, a journal written between
// the reads (a rollout the leader has just seen start) is neither a slot, in the first,
// nor the start's to count, in the second, which then finds the journal shows it: the
// start would count nowhere. Once is for one decision, and one goroutine.
type Once struct {
	store *Store
	read  map[workloadKey]*Journal
}

// Once returns a reader of the store that reads each journal at most once.
func (s *Store) Once() *Once { return &Once{store: s} }

// Get is the workload's journal as the store held it when Once first read it; nil when
// it held none.
func (o *Once) Get(kind v1alpha1.WorkloadKind, namespace, name string) *Journal {
	k := workloadKey{kind, namespace, name}
	if j, ok := o.read[k]; ok {
		return j
	}
	if o.read == nil {
		o.read = map[workloadKey]*Journal{}
	}
	j := o.store.Get(kind, namespace, name)
	o.read[k] = j
	return j
}

// FleetSlots is Store.FleetSlots, each journal read once.
func (o *Once) FleetSlots(p *v1alpha1.RolloutPolicy, refs []workload.Ref, now time.Time) []Slot {
	return fleetSlots(o, p, refs, now)
}

// DefaultStalledSlotLifetime is concurrency.stalledSlotLifetime's default, as the CRD sets it.
const DefaultStalledSlotLifetime = time.Hour

// SlotLifetime is how long a stalled rollout keeps its slot under the rule (0: until it is
// fixed); unset is the CRD's default, which the API server fills in.
func SlotLifetime(r *v1alpha1.ConcurrencyRule) time.Duration {
	if r == nil || r.StalledSlotLifetime == nil {
		return DefaultStalledSlotLifetime
	}
	return r.StalledSlotLifetime.Duration
}
