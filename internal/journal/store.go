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
	invalid prometheus.Counter
}

// NewMetrics registers the journal's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{invalid: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "holdfast_journal_invalid_total",
		Help: "Revision journals read that did not decode or did not describe their workload (edited by hand, corrupt); each was read as absent.",
	})}
	if err := reg.Register(m.invalid); err != nil {
		return nil, err
	}
	return m, nil
}

// Invalid counts one invalid journal read; a nil Metrics counts nothing.
func (m *Metrics) Invalid() {
	if m != nil {
		m.invalid.Inc()
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

// Unfinished names (kind namespace/name) the workloads among refs whose rollouts are
// unfinished as their journals recorded them: not finished, not held, not deleted. Those
// without progress for stallAfter end in StalledMark.
func (s *Store) Unfinished(refs []workload.Ref, stallAfter time.Duration, now time.Time) []string {
	var out []string
	for _, w := range refs {
		cur := s.Get(w.Kind, w.Namespace, w.Name).Rolling()
		if cur == nil {
			continue
		}
		name := w.String()
		if now.Sub(cur.Progressed) >= stallAfter {
			name += StalledMark
		}
		out = append(out, name)
	}
	return out
}
