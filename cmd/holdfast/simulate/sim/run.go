package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/controller"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// Namespace is where the simulated holdfast keeps its journals and ledgers.
const Namespace = "holdfast-system"

// settleLimit bounds one controller's actions at one instant.
const settleLimit = 100000

// epoch is the simulation's start: an hour in, so that the starting pods can have been
// Ready for an hour.
var epoch = time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)

type sim struct {
	sc       *Scenario
	now      time.Time
	startup  time.Duration
	store    *memstore.Store
	writer   memstore.Writer
	journals *journal.Store
	// writers are the templates' field managers, which the server's cache keeps.
	writers     *informer.Writers
	recorders   map[v1alpha1.WorkloadKind]*controller.JournalRecorder
	rollout     *rollout.Handler
	eviction    *eviction.Handler
	rolloutPols bool
	// revertWindow is the longest of the RolloutPolicies': within it, two writers whose
	// template changes follow each other are fighting (WritersFighting).
	revertWindow time.Duration

	nodes     []*node
	nodeByNam map[string]*node
	workloads []*simWorkload
	byRef     map[workload.Ref]*simWorkload
	operators []*operator
	drains    []*drainRun
	res       *Result
	seq       int
	step      int // the next timeline step
	// placements counts the changes that can let a pending pod be placed: pods gone,
	// nodes cordoned or uncordoned.
	placements int
}

// Run runs the scenario and returns what happened.
func Run(sc *Scenario) (*Result, error) {
	s := &sim{sc: sc, now: epoch, startup: durationOr(sc.Spec.PodStartup, scenariov1alpha1.DefaultPodStartup),
		store:     memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}),
		nodeByNam: map[string]*node{}, byRef: map[workload.Ref]*simWorkload{},
		res: &Result{Scenario: sc.Name, Description: sc.Spec.Description}}
	s.store.Now = func() metav1.Time { return metav1.NewTime(s.now) }
	s.writer = memstore.Writer{Store: s.store}
	if err := s.holdfast(); err != nil {
		return nil, err
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := s.checkExpectations(); err != nil {
		return nil, err
	}
	end := epoch.Add(durationOr(sc.Spec.Until, scenariov1alpha1.DefaultUntil))
	for {
		s.tick()
		next, ok := s.next()
		if !ok || next.After(end) {
			if ok {
				s.res.TimedOut = true
				s.now = end
			}
			break
		}
		s.now = next
	}
	s.finish()
	s.expect()
	return s.res, nil
}

// clock is the simulation's virtual clock.
type clock struct{ s *sim }

func (c clock) Now() time.Time                  { return c.s.now }
func (c clock) Since(t time.Time) time.Duration { return c.s.now.Sub(t) }

func (s *sim) at() float64 { return s.now.Sub(epoch).Seconds() }

func (s *sim) uid() types.UID {
	s.seq++
	return types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", s.seq))
}

// tick is one instant: what is due happens, then the controllers and the recorder catch up.
func (s *sim) tick() {
	// Evicted pods whose grace period ended are gone.
	for _, w := range s.workloads {
		for _, p := range slices.Clone(w.k.Pods) {
			if p.Terminating && !s.now.Before(w.objects[p].DeletionTimestamp.Add(s.termination(w.objects[p]))) {
				w.k.Remove(p)
				w.dirty = true
			}
		}
	}
	s.catchUp()
	for s.step < len(s.sc.Spec.Timeline) && !epoch.Add(s.sc.Spec.Timeline[s.step].At.Duration).After(s.now) {
		s.begin(s.sc.Spec.Timeline[s.step])
		s.step++
		s.catchUp()
	}
	for _, o := range s.operators {
		if o.due(s.now) {
			s.operate(o)
			s.catchUp()
		}
	}
	for _, d := range s.drains {
		s.drainStep(d)
	}
	s.catchUp()
	s.sample()
}

// catchUp runs the controllers, the scheduler and the journal recorder until quiet.
func (s *sim) catchUp() {
	for range 100 {
		for _, w := range s.workloads {
			s.settle(w)
			s.schedule(w)
		}
		if !s.refresh() {
			break
		}
	}
	s.record()
}

// begin starts a timeline step.
func (s *sim) begin(st scenariov1alpha1.Step) {
	switch {
	case st.Apply != nil:
		s.want(st.Apply)
	case st.Drain != nil:
		s.startDrain(st.Drain)
	case st.Cordon != nil:
		s.cordon(st.Cordon.Nodes, true)
	case st.Uncordon != nil:
		s.cordon(st.Uncordon.Nodes, false)
	}
}

func (s *sim) log(e Entry) {
	e.At = math.Round(s.at()*10) / 10
	s.res.Timeline = append(s.res.Timeline, e)
}

// next is the next instant at which something can happen: a step of the timeline, a pod
// getting Ready or gone, a retry; none when the scenario has run its course.
func (s *sim) next() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(s.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if s.step < len(s.sc.Spec.Timeline) {
		consider(epoch.Add(s.sc.Spec.Timeline[s.step].At.Duration))
	}
	for _, w := range s.workloads {
		for _, p := range w.k.Pods {
			if p.Terminating {
				consider(w.objects[p].DeletionTimestamp.Add(s.termination(w.objects[p])))
			} else if !p.ReadyAt.IsZero() {
				consider(p.ReadyAt)
				consider(p.ReadyAt.Add(w.minReady))
			}
		}
	}
	for _, o := range s.operators {
		if !o.done {
			consider(o.next)
		}
	}
	for _, d := range s.drains {
		for _, t := range d.tries {
			if !t.done && !t.evicted {
				consider(t.next)
			}
		}
	}
	return next, !next.IsZero()
}
