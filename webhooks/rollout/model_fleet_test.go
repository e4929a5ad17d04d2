package rollout

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/kubemodel"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
)

// The fleet explorer (docs/invariants.md, "The fleet"): the single explorer's model run for
// 2–5 workloads at once (Deployments, StatefulSets and DaemonSets on internal/kubemodel's
// controllers, one namespace each), selected by one generated RolloutPolicy with a fleet
// limit (rules.concurrency, maxInFlight as a number or a percentage) and/or a shared budget
// (rules.sharedBudget, naming a DisruptionPolicy over their pods), the other rules drawn as
// the single explorer draws them. Template edits, scales, pods becoming Ready as the
// sequence says, clock steps and evictions interleave; holdfast's real rollout Handler
// (two replicas) decides the workload changes and the real eviction Handler decides the
// evictions, both over one in-memory API server holding the ledgers (fleet starts, the
// groups' evictions and rollout starts) as Leases with optimistic concurrency, as in
// production. The outcome invariants are computed from the simulated pods and the clock:
//
//   - F1: the selected workloads with two or more templates having live pods, counting those
//     whose rollout holdfast admitted under the limit and leaving out those stalled for
//     longer than stalledSlotLifetime (drawn, as maxInFlightCap is), never exceed
//     maxInFlight as fleetLimit resolves it (a percentage of the selected workloads rounded
//     up, at most the cap, at least 1);
//   - F2: a group's pods unavailable (not Ready or missing) never exceed the larger of its
//     shared budget and the rollout's own maxUnavailable (kube paces a rollout's
//     replacements by its strategy, counting evicted pods as unavailable); and no rollout
//     the budget governs starts within the DisruptionPolicy's cooldown of an eviction of a
//     Ready pod of its group, nor while evicted pods fill the budget;
//   - L1: once every rollout has finished (the stalled ones fixed) and the drains stop, a
//     further rollout is admitted within the bound docs/invariants.md states.
//
// Relabels (relabel, drawn from a stream of their own between the operations): a workload
// leaves the policy's selection (its label guard=off; the operator's relabel out is refused
// under a policy in force, an exempt requester's admitted), its template changes outside it
// (admitted: no policy selects it) and rolls out, and it comes back in later through the
// operator's relabel, which holdfast judges on what it brings (checkEntering,
// checkEnteredChange), retried as the refusal says, past the single explorer's longest
// wait by an exempt requester. While it is out the leader's recorder retires its journal
// (JournalRecorder.retire: kept, marked, not updated, dropped after journal.Retention); F1
// neither counts it nor resolves a percentage against it.
//
// Re-creates and flag-following scales (recreate, scaleFlag, drawn from another stream of
// their own, as is which Deployments and StatefulSets run the konnectivity-server
// container whose --server-count the policy's argsMatchReplicas ties to their replicas): a
// workload deleted (orphaning or cascading) and created again under its name through the
// webhook, whose CREATE adopting pods of another template, or starting a new one over
// them, is a start F1 counts and F2's start half judges; and a scale that changes the
// replicas and the flag together, which is no new revision (I4): F1 counts a workload as
// rolling by its images, not by the flag, and the fleet ledger must hold no start of it.
//
//   - F3: a flag-following scale's template gets its first pods beside two others only
//     when the rules let it past (an exception, a stalled rollout): during an unfinished
//     rollout such a scale is admitted only towards a template that still has pods.

var (
	fleetModelSequences = flag.Int("rollout-fleet-model.sequences", 2000, "sequences the rollout fleet explorer runs (make fuzz runs more)")
	fleetModelFrom      = flag.Int("rollout-fleet-model.from", 0, "the first sequence the fleet explorer runs (to split a long run)")
	fleetModelTrace     = flag.Bool("rollout-fleet-model.trace", false, "print every request the fleet explorer sends, holdfast's answer and the pods")
)

const (
	fLedgerNamespace = "holdfast-system"
	fGrace           = 2 * time.Second // how long an evicted pod terminates
	fPolicy          = "fleet"
	fBudget          = "agents"
	fDrainer         = "system:serviceaccount:kube-system:drainer"
)

// fop is one generated operation of the fleet explorer; a failing sequence prints as a list.
type fop struct {
	Kind       string
	W, N, Repl int
}

func (o fop) String() string {
	return fmt.Sprintf("{Kind: %q, W: %d, N: %d, Repl: %d},", o.Kind, o.W, o.N, o.Repl)
}

// fmoreKinds are the operations drawn from the stream of their own (generatedFleet).
var fmoreKinds = []string{"recreate", "scaleFlag"}

var fopKinds = []string{"edit", "edit", "edit", "editAs", "editOld", "scale", "evict", "evict", "evict", "evictEdit",
	"race", "raceEvict", "raceStart", "tick", "tick", "sync", "policy", "pause", "resume", "partition", "onDelete", "rollingUpdate", "holdRelease"}

// fconfig is what a sequence's seed draws: the workloads and the policies.
type fconfig struct {
	kinds        []v1alpha1.WorkloadKind
	sizes        []int
	maxUnavail   []int // a Deployment's strategy maxUnavailable (its maxSurge is 1)
	concurrency  *intstr.IntOrString
	shared       bool
	minInterval  bool
	revertWindow bool
	window       int           // index into modelWindows
	offset       time.Duration // when in the windows' two-minute cycle the sequence starts
	budget       intstr.IntOrString
	cooldown     time.Duration
	// slotLifetime is concurrency.stalledSlotLifetime (nil: the default, 1h; 0: forever),
	// and limitCap its maxInFlightCap (0: none).
	slotLifetime *time.Duration
	limitCap     int
	// perNamespace is concurrency.maxInFlightPerNamespace (0: unset); when set, perNamespace+1
	// workloads share each namespace, so that the limit can bind.
	perNamespace int
	// skew is how far rollout replica 1's clock is ahead of the cluster's (behind when
	// negative), within budget.MaxClockSkew; replica 0 and the eviction guard keep its time.
	skew time.Duration
	// pdb is whether each workload has a PodDisruptionBudget over its pods, of maxUnavailable
	// pdbBudget: the shared budget's (the floor holdfast's generator writes) or a stricter
	// one of the operator's, none at all included. kube's PDB check then runs after the
	// eviction guard admitted an eviction, and may refuse it (kubeAdmits).
	pdb       bool
	pdbBudget intstr.IntOrString
}

var (
	fMaxInFlights = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("25%"),
		intstr.FromString("34%"), intstr.FromString("50%"), intstr.FromString("60%")}
	fBudgets   = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("34%"), intstr.FromString("50%")}
	fCooldowns = []time.Duration{0, 10 * time.Second, 20 * time.Second}
	// fSlotLifetimes: unset (the 1h default), 0s (kept until fixed), and lifetimes a
	// sequence outlives.
	fSlotLifetimes = []*time.Duration{nil, ptr.To(time.Duration(0)), ptr.To(time.Second), ptr.To(15 * time.Second)}
)

func fleetConfig(seed uint64) fconfig {
	r := rand.New(rand.NewPCG(seed, 0xf1ee7))
	c := fconfig{budget: fBudgets[r.IntN(len(fBudgets))], cooldown: fCooldowns[r.IntN(len(fCooldowns))],
		minInterval: r.IntN(2) == 0, revertWindow: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		// Half the sequences have windows, which hold every start for up to a minute.
		c.window = 1 + r.IntN(len(modelWindows)-1)
	}
	c.offset = time.Duration(r.IntN(120)) * time.Second
	for range 2 + r.IntN(4) {
		c.kinds = append(c.kinds, workload.Kinds()[r.IntN(3)])
		c.sizes = append(c.sizes, 2+r.IntN(3))
		c.maxUnavail = append(c.maxUnavail, r.IntN(2))
	}
	switch r.IntN(4) {
	case 0:
		c.shared = true
	case 1:
		c.concurrency = &fMaxInFlights[r.IntN(len(fMaxInFlights))]
	default:
		c.shared, c.concurrency = true, &fMaxInFlights[r.IntN(len(fMaxInFlights))]
	}
	// Drawn last, so that the draws above stay what they were for every seed.
	c.slotLifetime = fSlotLifetimes[r.IntN(len(fSlotLifetimes))]
	if r.IntN(2) == 0 {
		c.limitCap = 1 + r.IntN(2)
	}
	if c.concurrency != nil && r.IntN(2) == 0 {
		c.perNamespace = 1 + r.IntN(2)
	}
	c.skew = fSkews[r.IntN(len(fSkews))]
	// Drawn from a stream of its own, so that every seed's configuration above and its
	// operations stay what the replays name.
	pr := rand.New(rand.NewPCG(seed, 0x9db))
	c.pdb = pr.IntN(2) == 0
	c.pdbBudget = []intstr.IntOrString{c.budget, c.budget, intstr.FromInt32(1), intstr.FromInt32(0)}[pr.IntN(4)]
	if pr.IntN(3) == 0 {
		// A cooldown longer than an eviction's lapse: one kube refused must not hold the
		// group's rollouts for all of it (budget.Evictions.LastEffective).
		c.cooldown = time.Minute
	}
	return c
}

// fSkews are the clock skews drawn between the two rollout replicas.
var fSkews = []time.Duration{0, 0, 2 * time.Second, -3 * time.Second, budget.MaxClockSkew, -budget.MaxClockSkew}

// namespaceOf is where workload i lives, and its name: one namespace each, or, under
// maxInFlightPerNamespace, perNamespace+1 to a namespace (the first named mName).
func (c fconfig) namespaceOf(i int) (ns, name string) {
	if c.perNamespace == 0 {
		return fmt.Sprintf("t%d", i), mName
	}
	ns = fmt.Sprintf("t%d", i/(c.perNamespace+1))
	if i%(c.perNamespace+1) == 0 {
		return ns, mName
	}
	return ns, fmt.Sprintf("%s%d", mName, i)
}

// fleetLimit is maxInFlight resolved as docs/fleet.md states, written apart from
// policy.Resolve: a number as it is, a percentage of the selected workloads rounded up
// (intstr's GetScaledValueFromIntOrPercent with roundUp) and at most limitCap when set,
// and at least 1.
func fleetLimit(v intstr.IntOrString, selected, limitCap int) int {
	n := v.IntValue()
	if v.Type == intstr.String {
		var pct int
		if _, err := fmt.Sscanf(v.StrVal, "%d%%", &pct); err != nil {
			panic(err)
		}
		n = (pct*selected + 99) / 100
		if limitCap > 0 {
			n = min(n, limitCap)
		}
	}
	return max(n, 1)
}

// groupBudget is a DisruptionPolicy's maxUnavailable resolved as kube's disruption
// controller resolves a PDB's (pkg/controller/disruption/disruption.go,
// getExpectedScale and GetScaledValueFromIntOrPercent rounding up).
func groupBudget(v intstr.IntOrString, expected int) int {
	if v.Type == intstr.Int {
		return v.IntValue()
	}
	var pct int
	if _, err := fmt.Sscanf(v.StrVal, "%d%%", &pct); err != nil {
		panic(err)
	}
	return (pct*expected + 99) / 100
}

// fwl is one workload of the fleet, its spec as the API server holds it and its pods.
type fwl struct {
	kind       v1alpha1.WorkloadKind
	ns         string
	name       string
	generation int64
	observed   int64
	t          tmpl
	replicas   int
	nodes      []int
	maxUnavail int
	// paused is a Deployment's spec.paused, onDelete a StatefulSet's or DaemonSet's OnDelete
	// strategy, partition a StatefulSet's RollingUpdate partition.
	paused, onDelete bool
	partition        int
	// heldAt is when the workload was last held, and heldT its template then: the stall
	// clock stops while it is held (pausing never stalls a rollout).
	heldAt    time.Time
	heldT     tmpl
	rests     partitionRest // the last template and partition it rested at
	liftedAt  time.Time     // when a hold on its rollout was last lifted
	current   tmpl
	sets      []*kubemodel.ReplicaSet[tmpl]
	revisions map[tmpl]int64
	created   map[tmpl]time.Time
	pods      []*mpod
	names     map[*mpod]string // a unique name, the pod's UID and a Deployment's or DaemonSet's pod name (podName)
	goneAt    map[*mpod]time.Time
	broken    map[int]bool
	journal   *journal.Journal

	// What the outcome invariants keep, from the pods and the clock.
	live []tmpl
	// admitted is, per tag, why the outcome invariants excuse the start that made it the
	// spec's template, per invariant ("" counts).
	admitted map[int]fexcuse
	prev     int // the tag the last start replaced
	// The stall clock of the current template: when its Ready pods last rose (best).
	progressed time.Time
	best       int
	lastStart  time.Time
	// maxReady is the most pods Ready at once since the last scale: the pods a scale up
	// adds are not disrupted before they ever served.
	maxReady int
	// evictions are when admitted evictions of Ready pods took effect; evictedSlots their
	// pods' StatefulSet ordinals or DaemonSet nodes (-1 for a Deployment's).
	evictions    []time.Time
	evictedSlots []int
	// guardAdmitted is when the eviction guard last admitted an eviction of a Ready pod,
	// whether or not kube's PDB check then refused it: holdfast's ledger holds it either way
	// (until budget.EvictionLapse when kube refused it); refused are those kube refused,
	// which hold the cooldown only once their pod is gone or terminating for another reason
	// (holdfast can no longer tell them from evictions that took effect).
	guardAdmitted time.Time
	refused       []refusedEviction
	// disrupted is kube's PDB status' disruptedPods: the pods whose eviction it admitted,
	// counted as unhealthy until they are gone or its DeletionTimeout (2 minutes) passes.
	disrupted map[*mpod]time.Time
	// excused is a group whose pods went down through a start F2 excuses, or through
	// evictions beside a scale down (below), until it is whole.
	excused bool
	// scaledDown is when the group's replicas were last lowered.
	scaledDown time.Time
	// out is a workload relabelled out of the policy's selection (guard=off); leftT is its
	// template when it left, enteredAt when it last came back in. countedAt is when the
	// request F1 counts its rollout from was admitted (a start, or an entry: see enter).
	out       bool
	leftT     tmpl
	enteredAt time.Time
	countedAt time.Time
	// gone is a workload deleted and not yet created again (recreate); lastObj its last
	// state, which the recorder observes before it retires the journal; incarnation counts
	// its re-creates (each a new UID).
	gone        bool
	lastObj     client.Object
	incarnation int
	// continues is set while a CREATE with the template the deleted workload had, which held
	// no rollout (not paused, OnDelete or partitioned), is noted as started.
	continues bool
	// createdAt is when it was last created again: the leader's journal of the new object
	// may date its current revision's progress from then.
	createdAt time.Time
	// flagScaled is, per template a flag-following scale made the spec's, why F3 excuses
	// its first pods beside two other templates ("" excuses nothing).
	flagScaled map[tmpl]string
}

type fexcuse struct{ fleet, shared string }

// refusedEviction is an eviction of pod p the eviction guard admitted at at and kube's PDB
// check refused.
type refusedEviction struct {
	at time.Time
	p  *mpod
}

type freplica struct {
	skew    time.Duration
	reader  client.Reader
	store   *journal.Store
	synced  time.Time
	clock   *clocktesting.FakePassiveClock
	handler *Handler
}

type fevictor struct {
	skew   time.Duration // its clock's, against the cluster's
	reader client.Reader
	store  *journal.Store
	synced time.Time
	clock  *clocktesting.FakePassiveClock
	h      *eviction.Handler
}

type fworld struct {
	seed     uint64
	cfg      fconfig
	rng      *rand.Rand
	now      time.Time
	ops      []fop
	ws       []*fwl
	mode     v1alpha1.Mode
	policyAt time.Time
	ledger   *racingClient // the API server's Leases, the one store both guards' ledgers live in
	reps     [2]*freplica
	// evictors are the eviction guard's two replicas (the second on the rollout
	// replica's skewed clock); evRng draws the second one's cache syncs, apart from rng so
	// that every seed's sequence stays as the replays name it.
	evictors   [2]*fevictor
	evRng      *rand.Rand
	podSeq     int
	nextTag    int
	lastRecord time.Time
	store      *journal.Store // the journals as last recorded
	truth      *utiltesting.MemReader
	truthAt    time.Time
	version    int
	truthVer   int

	violations []string
	deadlock   bool
	checked    map[string]int
	gaps       map[string]int // the known gaps seen, by name
	// deciding is the skew of the replica deciding the request being sent: a temporary
	// exemption ends on its clock (docs/invariants.md: exempt until it expires on the
	// clock of the replica that decides, at most budget.MaxClockSkew from the cluster's).
	deciding time.Duration
	maxSeen  int // the most counted workloads rolling at once
	// selLog is how many workloads the policy selected, before and after each relabel
	// admitted; relabels counts the relabel walks; keep is journal.Retention of the policy
	// (how long the recorder keeps a retired journal).
	selLog   []selChange
	relabels relabelCounts
	keep     time.Duration
	// nsOut are the namespaces the namespace walks took out of the policy's namespace
	// selection (relabelNamespace).
	nsOut map[string]bool
	// recreates counts what the re-creates and the flag-following scales did.
	recreates recreateCounts
}

// recreateCounts are what the re-creates did (orphan and cascade the deletes, newTemplate
// those created with another template than they had, admitted the CREATEs admitted,
// refused those refused at least once and refusals the refusals, exempt those created by
// an exempt requester past the operator's longest wait, counted those F1 counts as a
// start), and the flag-following scales (flagScales sent, flagAdmitted admitted of them,
// flagRefused refused, flagRolling admitted while two templates had live pods).
type recreateCounts struct {
	orphan, cascade, newTemplate, admitted, refused, refusals, exempt, counted int
	flagScales, flagAdmitted, flagRefused, flagRolling                         int
}

func (r *recreateCounts) add(o recreateCounts) {
	r.orphan += o.orphan
	r.cascade += o.cascade
	r.newTemplate += o.newTemplate
	r.admitted += o.admitted
	r.refused += o.refused
	r.refusals += o.refusals
	r.exempt += o.exempt
	r.counted += o.counted
	r.flagScales += o.flagScales
	r.flagAdmitted += o.flagAdmitted
	r.flagRefused += o.flagRefused
	r.flagRolling += o.flagRolling
}

// selChange is a relabel admitted at at, which changed the selected workloads from before
// to after.
type selChange struct {
	at            time.Time
	before, after int
}

// relabelCounts are what the relabel walks did: left the selection (outByOperator of them
// the operator's relabel out, admitted under Warn or a policy not yet in force), entered it
// again (changed of them with another template than they left with; exempt the exempt
// requester's entries past the longest wait, withEdit those that brought a new template in
// the same update), and the operator's entries refused (refusals the refusals, refused the
// entries refused at least once).
type relabelCounts struct {
	left, outByOperator, entered, changed, exempt, withEdit, refused, refusals int
	// The namespace walks': namespaces taken out and brought back in, the workloads their
	// entries brought in (changed of them with another template than they left with), the
	// entries refused at least once and the exempt requester's past the longest wait.
	nsLeft, nsEntered, nsWorkloads, nsChanged, nsRefused, nsExempt int
}

func newFleet(seed uint64, broken func(Input) (Decision, error)) *fworld {
	return newFlaggedFleet(seed, broken, nil)
}

// newFlaggedFleet is newFleet with the workloads flagged[i] running the
// konnectivity-server container whose --server-count follows their replicas (the policy's
// argsMatchReplicas flag).
func newFlaggedFleet(seed uint64, broken func(Input) (Decision, error), flagged []bool) *fworld {
	cfg := fleetConfig(seed)
	w := &fworld{seed: seed, cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0xf7)), now: mStart, mode: v1alpha1.ModeEnforce,
		policyAt: mStart.Add(-time.Hour), nextTag: 2, checked: map[string]int{}, gaps: map[string]int{}, version: 1,
		nsOut: map[string]bool{}}
	// The API server's object store, as client-go's tracker keeps it (resource versions,
	// conflicts), without managed fields, which no ledger reads.
	w.ledger = &racingClient{Client: fake.NewClientBuilder().WithScheme(modelScheme).
		WithObjectTracker(clienttesting.NewObjectTracker(modelScheme, serializer.NewCodecFactory(modelScheme).UniversalDecoder())).Build()}
	for i, kind := range cfg.kinds {
		ns, name := cfg.namespaceOf(i)
		x := &fwl{kind: kind, ns: ns, name: name, generation: 1, replicas: cfg.sizes[i], t: tmpl{tag: 1},
			revisions: map[tmpl]int64{}, created: map[tmpl]time.Time{}, names: map[*mpod]string{}, goneAt: map[*mpod]time.Time{},
			broken: map[int]bool{}, admitted: map[int]fexcuse{}, progressed: w.now, prev: 1, flagScaled: map[tmpl]string{}}
		if i < len(flagged) && flagged[i] && kind != v1alpha1.KindDaemonSet {
			x.t.count = x.replicas
		}
		if kind == v1alpha1.KindDeployment {
			x.maxUnavail = cfg.maxUnavail[i]
		} else {
			x.maxUnavail = 1
		}
		if kind == v1alpha1.KindDaemonSet {
			for n := range cfg.sizes[i] {
				x.nodes = append(x.nodes, n)
			}
		}
		x.current = x.t
		x.revisions[x.t], x.created[x.t] = 1, w.now
		for s := range x.want() {
			slot := s
			if kind == v1alpha1.KindDeployment {
				slot = -1
			}
			x.add(w, &mpod{Template: x.t, Slot: slot, Created: w.now, ReadyAt: w.now})
		}
		x.observed, x.maxReady, x.live = x.generation, x.want(), []tmpl{x.t}
		k := w.kube(x)
		k.DeriveSets()
		x.sets = k.Sets
		w.ws = append(w.ws, x)
	}
	w.now = w.now.Add(time.Minute + cfg.offset)
	w.record()
	for i := range w.reps {
		rep := &freplica{}
		if i == 1 {
			rep.skew = cfg.skew
		}
		c := clocktesting.NewFakePassiveClock(w.now.Add(rep.skew))
		rep.clock = c
		rep.handler = &Handler{Reader: utiltesting.ReaderFunc(func() client.Reader { return rep.reader }), Decoder: admission.NewDecoder(modelScheme),
			Live: utiltesting.ReaderFunc(func() client.Reader { return w.truthReader() }), Clock: c, Matcher: policy.NewMatcher(), decide: broken,
			Ledgers: &budget.Ledgers{Live: w.ledger, Namespace: fLedgerNamespace, Identity: fmt.Sprintf("replica-%d", i)}}
		w.reps[i] = rep
		w.sync(i)
	}
	w.evRng = rand.New(rand.NewPCG(seed, 0xe71c))
	for j := range w.evictors {
		ev := &fevictor{}
		if j == 1 {
			ev.skew = cfg.skew
		}
		ev.clock = clocktesting.NewFakePassiveClock(w.now.Add(ev.skew))
		ev.h = &eviction.Handler{Reader: utiltesting.ReaderFunc(func() client.Reader { return ev.reader }),
			APIReader: utiltesting.ReaderFunc(func() client.Reader { return w.truthReader() }), Clock: ev.clock, Matcher: policy.NewMatcher(),
			Ledgers: &budget.Ledgers{Live: w.ledger, Namespace: fLedgerNamespace, Identity: fmt.Sprintf("replica-%d", j)}, Holds: &eviction.Holds{}}
		w.evictors[j] = ev
		w.syncEvictor(j)
	}
	return w
}

func (x *fwl) want() int {
	if x.kind == v1alpha1.KindDaemonSet {
		return len(x.nodes)
	}
	return x.replicas
}

// with is the template of image tag as the operator writes it for x: its
// konnectivity-server flag, if it runs one, following the replicas.
func (x *fwl) with(tag int) tmpl {
	if x.t.count == 0 {
		return tmpl{tag: tag}
	}
	return tmpl{tag: tag, count: x.replicas}
}

// hasRevision is whether kube made a revision of image tag for x (whatever its flag).
func (x *fwl) hasRevision(tag int) bool {
	for t, n := range x.revisions {
		if t.tag == tag && n > 0 {
			return true
		}
	}
	return false
}

func (x *fwl) add(w *fworld, p *mpod) *mpod {
	w.podSeq++
	x.names[p] = fmt.Sprintf("pod-%d", w.podSeq)
	x.pods = append(x.pods, p)
	return p
}

// podName is pod p's name as kube's controller gives it: a StatefulSet's pod is named by
// its ordinal, <set>-<ordinal> (getPodName, pkg/controller/statefulset/stateful_set_utils.go),
// which is also how a StatefulSet created again adopts an orphan (isMemberOf); a
// Deployment's or DaemonSet's gets a generated name, unique in the model.
func (x *fwl) podName(p *mpod) string {
	if x.kind == v1alpha1.KindStatefulSet && p.Slot >= 0 {
		return fmt.Sprintf("%s-%d", x.name, p.Slot)
	}
	return x.names[p]
}

func (w *fworld) ready(p *mpod) bool {
	return !p.Terminating && !p.ReadyAt.IsZero() && !w.now.Before(p.ReadyAt)
}

// kube is workload x as its controller reads it.
func (w *fworld) kube(x *fwl) *kubemodel.Workload[tmpl] {
	return &kubemodel.Workload[tmpl]{Kind: x.kind, Template: x.t, Replicas: x.replicas, Nodes: x.nodes, Current: x.current, HasCurrent: true,
		Paused: x.paused, OnDelete: x.onDelete, Partition: x.partition,
		Sets: x.sets, MaxUnavailable: x.maxUnavail, MaxSurge: 1, Pods: x.pods, Revisions: x.revisions, Ready: w.ready,
		NewPod: func(t tmpl, slot int) *mpod {
			p := &mpod{Template: t, Slot: slot, Created: w.now}
			if !x.broken[t.tag] {
				p.ReadyAt = w.now.Add(time.Duration(1+w.rng.IntN(4)) * time.Second)
			}
			w.podSeq++
			x.names[p] = fmt.Sprintf("pod-%d", w.podSeq)
			return p
		}}
}

// control is one second of every workload's controller, then the outcome checks.
func (w *fworld) control() {
	for _, x := range w.ws {
		x.pods = slices.DeleteFunc(x.pods, func(p *mpod) bool {
			at, ok := x.goneAt[p]
			if ok && !w.now.Before(at) {
				delete(x.goneAt, p)
				w.version++
				return true
			}
			return false
		})
		if !x.gone { // a deleted workload's pods stay as they are, no controller acting on them
			if _, ok := x.created[x.t]; !ok {
				x.created[x.t] = w.now
			}
			x.observed = x.generation
			k := w.kube(x)
			if k.Step() {
				w.version++
			}
			x.pods, x.current, x.sets = k.Pods, k.Current, k.Sets
		}
		before := x.live
		x.live = nil
		ready, cur := 0, 0
		for _, p := range x.pods {
			if !slices.Contains(x.live, p.Template) {
				x.live = append(x.live, p.Template)
			}
			if w.ready(p) {
				ready++
				if p.Template == x.t {
					cur++
				}
			}
		}
		x.maxReady = max(x.maxReady, min(ready, x.want()))
		w.checkFlagScales(x, before)
		for _, t := range x.live {
			if a := x.admitted[t.tag]; !slices.Contains(before, t) && a.fleet == stagedTemplatePods {
				w.gaps[stagedTemplatePods]++
			}
		}
		if cur > x.best {
			x.best, x.progressed = cur, w.now
		}
	}
	if *fleetModelTrace {
		for _, x := range w.ws {
			var pods []string
			for _, p := range x.pods {
				pods = append(pods, fmt.Sprintf("%d/%d%s", p.Template.tag, p.Slot, map[bool]string{true: "R", false: "-"}[w.ready(p)]+map[bool]string{true: "T", false: ""}[p.Terminating]))
			}
			w.tracef("  %s %s spec %d×%d down %d: %v", x.kind, x.ref(), x.t.tag, x.replicas, w.down(x), pods)
		}
	}
	w.checkFleet()
	w.checkBudgets()
}

// rolling is a workload with two or more images having live pods: templates that differ
// in the --server-count flag alone are the pods of a flag-following scale, which is no
// rollout of a new revision (I4) and takes no slot of the fleet (checkFlagScales judges
// what kube makes of it).
func (x *fwl) rolling() bool {
	for _, t := range x.live {
		if t.tag != x.live[0].tag {
			return true
		}
	}
	return false
}

// checkFlagScales is F3: a flag-following scale (argsMatchReplicas: replicas and
// --server-count changed together, not a new revision) never gives a third template
// live pods, unless the rules let it past: an exception (exemption), or a stalled rollout
// it was admitted over. kube rolls the scale's template out as any other, so a scale
// admitted while two templates have live pods would leave three.
func (w *fworld) checkFlagScales(x *fwl, before []tmpl) {
	for _, t := range x.live {
		ex, ok := x.flagScaled[t]
		if !ok || slices.Contains(before, t) {
			continue
		}
		w.checked["F3"]++
		if ex == "" && len(x.live) > 2 {
			w.violate("F3: %s %s has %d templates with live pods %v: %v, a flag-following scale's, got its first pod beside two others",
				x.kind, x.ref(), len(x.live), x.live, t)
		}
	}
}

// inFlight is a rolling workload whose controller rolls it out (docs/fleet.md: "a paused
// or OnDelete workload is not in flight: lifting the hold is the start, and is held
// then"): not held, and not at rest under its partition (a StatefulSet whose ordinals from
// its partition up all run its template, Ready, has finished the rollout its partition
// asked for; the next is the partition lowered, a start).
func (w *fworld) inFlight(x *fwl) bool {
	if x.rolling() && x.held() {
		w.checked["F1held"]++
		return false
	}
	if !x.rolling() || x.kind != v1alpha1.KindStatefulSet || x.partition == 0 {
		return x.rolling()
	}
	slots := x.bySlot()
	rests := true
	for o := range x.replicas {
		p := slots[o]
		if p == nil || (o >= x.partition && (p.Template != x.t || !w.ready(p))) {
			rests = false
		}
	}
	if rests {
		x.rests = partitionRest{x.t, x.partition}
	}
	// Once at rest, an evicted or deleted pod of it does not start the rollout again: kube
	// replaces it on its revision (as journal.Revision.Finished is sticky through churn).
	return x.rests != partitionRest{x.t, x.partition}
}

// partitionRest is a template at rest under a partition: every ordinal from the partition
// up ran it, Ready.
type partitionRest struct {
	t         tmpl
	partition int
}

func (x *fwl) bySlot() map[int]*mpod {
	out := map[int]*mpod{}
	for _, p := range x.pods {
		out[p.Slot] = p
	}
	return out
}

// held is a workload whose controller does not roll its template out: a paused
// Deployment, an OnDelete StatefulSet or DaemonSet, a StatefulSet partitioned at its
// replicas (mworld.held).
func (x *fwl) held() bool {
	switch x.kind {
	case v1alpha1.KindDeployment:
		return x.paused
	case v1alpha1.KindStatefulSet:
		return x.onDelete || x.partition >= x.replicas
	}
	return x.onDelete
}

// other is the template a start of x's current one replaces: the newest other template
// with live pods, or the one its last start replaced.
func (x *fwl) other() tmpl {
	out, n := tmpl{tag: x.prev}, int64(-1)
	for _, t := range x.live {
		if t != x.t && x.revisions[t] > n {
			out, n = t, x.revisions[t]
		}
	}
	return out
}

// stagedTemplatePods is the known gap of that name (docs/invariants.md, "Known gaps"; the
// single explorer's mworld.stagedTemplatePods): a template staged on a held workload gets
// its first pods when kube replaces an evicted pod of an OnDelete workload from its
// current template; the eviction is judged by the eviction guard's budget, and no rollout
// request is made that holdfast could refuse.
const stagedTemplatePods = "stagedTemplatePods"

// stalled is a rollout whose current template has had no more pods Ready for stallAfter
// (less the leader's lag, which may see it late).
func (w *fworld) stalled(x *fwl) bool {
	return x.unfinished(w) && w.now.Sub(x.progressed) >= mStall-mMaxLag
}

// released is a stalled rollout that no longer holds its slot: stalled for longer than
// concurrency.stalledSlotLifetime (less the leader's lag, which may date its last
// progress early).
func (w *fworld) released(x *fwl) bool {
	lifetime := journal.DefaultStalledSlotLifetime
	if w.cfg.slotLifetime != nil {
		lifetime = *w.cfg.slotLifetime
	}
	return lifetime > 0 && x.unfinished(w) && w.now.Sub(x.progressed) >= mStall+lifetime-mMaxLag
}

// unfinished is a workload whose pods do not all run its template and are Ready.
func (x *fwl) unfinished(w *fworld) bool {
	n := 0
	for _, p := range x.pods {
		if p.Template != x.t || !w.ready(p) {
			return true
		}
		n++
	}
	return n != x.want()
}

// checkFleet is F1. It counts the workloads selected now: one out of the selection is not
// the policy's (its slot is freed once the recorder retires its journal), and one that came
// back in is counted from its entry when the entry is what F1 counts (enter). The limit is
// resolved against the selected workloads as holdfast could read them when it admitted the
// newest of the rollouts counted (selectedSeen): an exempt requester's relabel out after it
// shrinks a percentage's base, and holdfast cannot take back rollouts it admitted before
// (without relabels, every workload, as always).
func (w *fworld) checkFleet() {
	if w.cfg.concurrency == nil {
		return
	}
	var counted []string
	var countedW []*fwl
	var newest time.Time
	perNamespace := map[string][]string{}
	for _, x := range w.ws {
		if w.outside(x) || x.gone {
			continue // no policy selects a workload relabelled out, nor one deleted
		}
		if w.released(x) {
			if x.rolling() {
				w.checked["F1released"]++
			}
			continue // stalled beyond its slot's lifetime: the breaker lets the fleet go on
		}
		if a, ok := x.admitted[x.t.tag]; ok && a.fleet == "" && w.inFlight(x) {
			name := fmt.Sprintf("%s %s/%s %v", x.kind, x.ns, x.name, x.live)
			counted = append(counted, name)
			countedW = append(countedW, x)
			perNamespace[x.ns] = append(perNamespace[x.ns], name)
			newest = maxTime(newest, x.countedAt)
		}
	}
	if w.cfg.perNamespace > 0 {
		for _, ns := range slices.Sorted(maps.Keys(perNamespace)) {
			w.checked["F1namespace"]++
			if n := len(perNamespace[ns]); n > w.cfg.perNamespace {
				w.violate("F1: %d selected workloads of namespace %s roll out at once (%s), maxInFlightPerNamespace is %d",
					n, ns, strings.Join(perNamespace[ns], "; "), w.cfg.perNamespace)
			}
		}
	}
	w.maxSeen = max(w.maxSeen, len(counted))
	selected := w.selectedSeen(newest)
	limit := fleetLimit(*w.cfg.concurrency, selected, w.cfg.limitCap)
	if len(counted) > 0 {
		w.checked["F1"]++
	}
	if len(counted) > limit {
		w.violate("F1: %d selected workloads roll out at once (%s), maxInFlight %s of %d is %d",
			len(counted), strings.Join(counted, "; "), w.cfg.concurrency.String(), selected, limit)
	}
}

// selected counts the workloads the policy selects now.
func (w *fworld) selected() int {
	n := 0
	for _, x := range w.ws {
		if !w.outside(x) && !x.gone {
			n++
		}
	}
	return n
}

// selectedSeen is the most workloads the policy selected as a replica's cache could show
// them at t (up to mMaxLag old, and a relabel made at t after the decision): what the
// percentage of a start admitted at t resolved against, at most.
func (w *fworld) selectedSeen(t time.Time) int {
	n := len(w.ws)
	for _, c := range w.selLog {
		if c.at.After(t) {
			break
		}
		n = c.after
	}
	for _, c := range w.selLog {
		if !c.at.Before(t.Add(-mMaxLag)) && !c.at.After(t) {
			n = max(n, c.before)
		}
	}
	return n
}

// expected is the pods a group should have serving: its replicas (a DaemonSet's nodes),
// less those a scale up added that never served yet.
func (x *fwl) expected() int { return min(x.want(), x.maxReady) }

// down is a group's pods unavailable: expected less the Ready ones not terminating.
func (w *fworld) down(x *fwl) int {
	ready := 0
	for _, p := range x.pods {
		if w.ready(p) {
			ready++
		}
	}
	return max(x.expected()-ready, 0)
}

// rolloutUnavailable is what kube lets the workload's own rollout take down: a
// Deployment's maxUnavailable (its maxSurge is 1, so kube's "1 when both are 0" never
// applies), a StatefulSet's and DaemonSet's, at least one.
func (x *fwl) rolloutUnavailable() int {
	if x.kind == v1alpha1.KindDeployment {
		return x.maxUnavail
	}
	return max(x.maxUnavail, 1)
}

// checkBudgets is F2's budget half.
func (w *fworld) checkBudgets() {
	if !w.cfg.shared {
		return
	}
	for _, x := range w.ws {
		if x.gone {
			continue // its group's pods are the operator's delete's
		}
		down := w.down(x)
		if down == 0 {
			x.excused = false
			continue
		}
		w.checked["F2"]++
		limit := max(groupBudget(w.cfg.budget, x.want()), x.rolloutUnavailable())
		if down > limit && !x.excused && !w.stalled(x) {
			w.violate("F2: %s %s has %d pods unavailable, over its shared budget (%s of %d: %d, its rollout's own %d)",
				x.kind, x.ref(), down, w.cfg.budget.String(), x.want(), groupBudget(w.cfg.budget, x.want()), x.rolloutUnavailable())
		}
	}
}

// exception is the registry of what the fleet's outcome invariants excuse: an exempt
// requester (exemption, the single explorer's registry), a policy in Warn, a policy
// changed less than a cache's lag ago.
func (w *fworld) exception(user string) string {
	if ex := exemption(user, w.now.Add(w.deciding)); ex != "" {
		return ex
	}
	if w.mode != v1alpha1.ModeEnforce {
		return string(w.mode)
	}
	if w.now.Sub(w.policyAt) <= mMaxLag {
		return "policy not yet in force"
	}
	return ""
}

// objects is the simulated cluster as the API server holds it.
func (w *fworld) objects() []client.Object {
	// argsMatchReplicas guards the workloads that run the konnectivity-server container
	// (newFlaggedFleet) and makes their flag-following scales scales (I4).
	rules := v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: mStall}}, ArgsMatchReplicas: fFlags}
	if w.cfg.minInterval {
		rules.MinInterval = &metav1.Duration{Duration: mMinInterval}
	}
	if w.cfg.revertWindow {
		rules.RevertWindow = &metav1.Duration{Duration: mRevert}
	}
	if w.cfg.concurrency != nil {
		rules.Concurrency = &v1alpha1.ConcurrencyRule{MaxInFlight: *w.cfg.concurrency}
		if w.cfg.slotLifetime != nil {
			rules.Concurrency.StalledSlotLifetime = &metav1.Duration{Duration: *w.cfg.slotLifetime}
		}
		if w.cfg.limitCap > 0 {
			rules.Concurrency.MaxInFlightCap = ptr.To(int32(w.cfg.limitCap))
		}
		if w.cfg.perNamespace > 0 {
			rules.Concurrency.MaxInFlightPerNamespace = ptr.To(int32(w.cfg.perNamespace))
		}
	}
	if w.cfg.shared {
		rules.SharedBudget = &v1alpha1.SharedBudget{DisruptionPolicy: fBudget}
	}
	pods := &metav1.LabelSelector{MatchLabels: map[string]string{"app": mName}}
	if w.cfg.perNamespace > 0 {
		// Workloads of one namespace have their own names and app labels.
		var apps []string
		for _, x := range w.ws {
			if !slices.Contains(apps, x.name) {
				apps = append(apps, x.name)
			}
		}
		pods = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: apps}}}
	}
	dp := v1alpha1.DisruptionPolicySpec{Targets: v1alpha1.PodTargets{Selector: pods},
		Mode: v1alpha1.ModeEnforce, MaxUnavailable: ptr.To(w.cfg.budget)}
	if w.cfg.cooldown > 0 {
		dp.Cooldown = &metav1.Duration{Duration: w.cfg.cooldown}
	}
	objs := []client.Object{
		&v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: fPolicy, UID: "rp-uid"}, Spec: v1alpha1.RolloutPolicySpec{
			Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"guard": "on"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{mTierLabel: "hosted"}}},
			Mode: w.mode, Rules: rules, Exemptions: mExemptions, Windows: modelWindows[w.cfg.window]}},
		&v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: fBudget, UID: "dp-uid"}, Spec: dp},
	}
	for _, x := range w.ws {
		objs = append(objs, w.workloadObjects(x)...)
	}
	return objs
}

// fFlags are the fleet policy's argsMatchReplicas: the single explorer's.
var fFlags = modelPolicies[0].ArgsMatchReplicas

// podTemplate is template t of x: a flagged one (count above 0) runs the
// konnectivity-server container with --server-count, as the single explorer's do.
func (x *fwl) podTemplate(t tmpl) *corev1.PodTemplateSpec {
	c := []corev1.Container{{Name: "app", Image: fmt.Sprintf("app:%d", t.tag)}}
	if t.count > 0 {
		c = append(c, corev1.Container{Name: "konnectivity-server", Image: "konnectivity:1", Args: []string{fmt.Sprintf("--server-count=%d", t.count)}})
	}
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": x.name}}, Spec: corev1.PodSpec{Containers: c}}
}

// object is workload x as the API server holds it, its status as its controller last
// wrote it.
func (w *fworld) object(x *fwl) client.Object {
	meta := metav1.ObjectMeta{Namespace: x.ns, Name: x.name, UID: x.uid(), Generation: x.generation,
		Labels: map[string]string{"guard": guardLabel(x.out)}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": x.name}}
	tpl := *x.podTemplate(x.t)
	all, updated := 0, 0
	for _, p := range x.pods {
		if w.ready(p) {
			all++
		}
		if p.Template == x.t {
			updated++
		}
	}
	mu := ptr.To(intstr.FromInt32(int32(x.maxUnavail)))
	switch x.kind {
	case v1alpha1.KindDeployment:
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(x.replicas)), Selector: sel, Template: tpl, Paused: x.paused,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: mu, MaxSurge: ptr.To(intstr.FromInt32(1))}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: x.observed, Replicas: int32(len(x.pods)), UpdatedReplicas: int32(updated),
				AvailableReplicas: int32(all), ReadyReplicas: int32(all)}}
	case v1alpha1.KindStatefulSet:
		rev, current := revisionOf(x.name, x.t), revisionOf(x.name, x.current)
		st := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(x.partition)), MaxUnavailable: mu}}
		if x.onDelete {
			st = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(x.replicas)), Selector: sel, Template: tpl,
			UpdateStrategy: st},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: x.observed, Replicas: int32(len(x.pods)), UpdatedReplicas: int32(updated),
				ReadyReplicas: int32(all), AvailableReplicas: int32(all), CurrentRevision: current, UpdateRevision: rev}}
	default:
		st := appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: mu}}
		if x.onDelete {
			st = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		}
		return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tpl, UpdateStrategy: st},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: x.observed, DesiredNumberScheduled: int32(len(x.nodes)), CurrentNumberScheduled: int32(len(x.pods)),
				UpdatedNumberScheduled: int32(updated), NumberAvailable: int32(all), NumberReady: int32(all)}}
	}
}

// workloadObjects is workload x, its namespace, revisions and pods, as the API server
// holds them (mworkload, as mworld.objects, for one of several namespaces; a DaemonSet's
// pods on their nodes, an evicted pod terminating).
func (w *fworld) workloadObjects(x *fwl) []client.Object {
	// Deleted, its revisions and pods stay without an owner (an orphaning delete; a
	// cascading one's pods terminate) until the workload of its name is created again.
	var objs []client.Object
	var refs []metav1.OwnerReference
	if !x.gone {
		owner := w.object(x)
		objs = append(objs, owner)
		refs = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind(string(x.kind)))}
	}
	if x.name == mName { // the first workload of its namespace brings it
		objs = append(objs, w.namespace(x.ns))
	}
	return append(objs, mworkload{ns: x.ns, name: x.name, kind: x.kind, owners: refs, revisions: x.revisions, created: x.created, template: x.podTemplate,
		uidPrefix: x.uidPrefix(), pods: x.pods, sets: x.sets, ready: w.ready, pod: func(_ int, p *mpod, pod *corev1.Pod) {
			pod.Name, pod.UID = x.podName(p), types.UID(x.ns+"-"+x.names[p])
			if p.Slot >= 0 && x.kind == v1alpha1.KindDaemonSet {
				pod.Spec.NodeName = fmt.Sprintf("node-%d", p.Slot)
			}
			if at, ok := x.goneAt[p]; ok {
				pod.DeletionTimestamp = ptr.To(metav1.NewTime(at.Add(-fGrace)))
			}
		}}.objects()...)
}

// uid is the UID of x's object: each re-create is a new object.
func (x *fwl) uid() types.UID {
	if x.incarnation > 0 {
		return types.UID(fmt.Sprintf("uid-%s-%d", x.uidPrefix(), x.incarnation))
	}
	return types.UID("uid-" + x.uidPrefix())
}

// ref is x's namespace and name.
func (x *fwl) ref() string { return x.ns + "/" + x.name }

// uidPrefix tells x's objects' UIDs from those of the other workloads of its namespace.
func (x *fwl) uidPrefix() string {
	if x.name == mName {
		return x.ns
	}
	return x.ns + "-" + x.name
}

// truthReader is the cluster as it is now (built once per change and second).
func (w *fworld) truthReader() *utiltesting.MemReader {
	if w.truth == nil || !w.truthAt.Equal(w.now) || w.truthVer != w.version {
		w.truth = utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, cached(w.objects())...)
		w.truthAt, w.truthVer = w.now, w.version
	}
	return w.truth
}

// record is the leader's journal recorder observing every workload.
func (w *fworld) record() {
	w.lastRecord = w.now
	r := w.truthReader()
	for _, x := range w.ws {
		if x.gone {
			w.forget(x, r)
			continue
		}
		if last := x.lastObj; last != nil {
			// Deleted and created again since the last look: the recorder takes the delete
			// as the journal's object gone (JournalRecorder.Reconcile, its gone map).
			x.lastObj = nil
			if j := x.journal; j != nil && j.Deleted == nil && last.GetUID() == j.UID && x.uid() != j.UID {
				seen := *j
				seen.Deleted = ptr.To(w.now)
				x.journal = &seen
			}
		}
		if w.outside(x) {
			w.retire(x)
			continue
		}
		x.journal = observeNamed(r, x.kind, x.ns, x.name, x.journal, fFlags, w.now)
		if len(x.journal.Revisions) == 0 {
			// Nothing has rolled out (a Deployment re-created paused over no ReplicaSet of its
			// template): the recorder writes no journal (JournalRecorder.Reconcile drops it).
			x.journal = nil
		}
	}
	w.store = w.journals()
}

// retire is the recorder's look at a workload no policy selects
// (internal/controller/journal.go, JournalRecorder.retire): the journal is kept, marked
// Deleted when first seen so and not updated, and dropped once journal.Retention has
// passed since; a re-entry then finds it (checkEnteredChange reads a retired journal too),
// or none once dropped.
func (w *fworld) retire(x *fwl) {
	if w.keep == 0 {
		w.keep = journal.Retention([]v1alpha1.RolloutPolicy{*w.objects()[0].(*v1alpha1.RolloutPolicy)})
	}
	switch j := x.journal; {
	case j == nil || len(j.Revisions) == 0 || (j.Deleted != nil && w.now.Sub(*j.Deleted) >= w.keep):
		x.journal = nil
	case j.Deleted == nil:
		next := *j
		next.Deleted = ptr.To(w.now)
		x.journal = &next
	}
}

// forget is the recorder's look at a deleted workload (internal/controller/journal.go,
// JournalRecorder.Reconcile with the workload gone): it records the last state it saw,
// with the history a workload of its name would adopt (history.ReadAdoptable), then
// retires the journal as it retires an unselected workload's.
func (w *fworld) forget(x *fwl, r client.Reader) {
	if last := x.lastObj; last != nil {
		x.lastObj = nil
		if x.journal != nil || last.GetLabels()["guard"] == "on" {
			var flags []v1alpha1.ArgMatchesReplicas
			if last.GetLabels()["guard"] == "on" {
				flags = fFlags
			}
			x.journal = observeGone(r, last, x.journal, flags, w.now)
		}
	}
	w.retire(x)
}

// journals is the journals as the leader wrote them, as a replica's cache holds them
// (read only: the replicas share one).
func (w *fworld) journals() *journal.Store {
	s := &journal.Store{}
	for _, x := range w.ws {
		if x.journal == nil {
			continue // dropped while out of the selection
		}
		cm, err := journal.Encode(x.journal, fLedgerNamespace)
		if err != nil {
			panic(err)
		}
		s.Add(cm)
	}
	return s
}

// sync gives rollout replica i the cluster and the journals as they are now.
func (w *fworld) sync(i int) {
	rep := w.reps[i]
	rep.reader, rep.synced, rep.store = w.truthReader(), w.now, w.store
	rep.handler.Journals = rep.store
}

func (w *fworld) syncEvictor(j int) {
	ev := w.evictors[j]
	ev.reader, ev.synced, ev.store = w.truthReader(), w.now, w.store
	ev.h.Journals = ev.store
}

// advance moves the clock by d, one controller step a second; the recorder and the caches
// lag at most mMaxLag.
func (w *fworld) advance(d time.Duration) {
	for end := w.now.Add(d); w.now.Before(end); {
		w.now = w.now.Add(time.Second)
		w.control()
		if w.now.Sub(w.lastRecord) >= mMaxLag || w.rng.IntN(3) == 0 {
			w.record()
		}
		for i, rep := range w.reps {
			if w.now.Sub(rep.synced) >= mMaxLag || w.rng.IntN(4) == 0 {
				w.sync(i)
			}
		}
		if w.now.Sub(w.evictors[0].synced) >= mMaxLag || w.rng.IntN(4) == 0 {
			w.syncEvictor(0)
		}
		if w.now.Sub(w.evictors[1].synced) >= mMaxLag || w.evRng.IntN(4) == 0 {
			w.syncEvictor(1)
		}
	}
}

func (w *fworld) tracef(format string, args ...any) {
	if *fleetModelTrace {
		fmt.Printf("%s "+format+"\n", append([]any{w.now.Format("15:04:05")}, args...)...)
	}
}

func (w *fworld) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf("%s after %d ops: ", w.now.Format("15:04:05"), len(w.ops))+fmt.Sprintf(format, args...))
}

// send sends the change of workload x to next through rollout replica i; on admission
// the API server stores it, and a start is noted for the outcome invariants. A change of
// its labels alone (a relabel) leaves its generation as it is, as the API server does.
func (w *fworld) send(i int, x *fwl, next func(), user string) bool {
	beforeT, beforeReplicas := x.t, x.replicas
	beforePaused, beforeOnDelete, beforePartition, heldBefore, beforeOut := x.paused, x.onDelete, x.partition, x.held(), x.out
	oldObj := w.object(x)
	next()
	spec := x.t != beforeT || x.replicas != beforeReplicas || x.paused != beforePaused || x.onDelete != beforeOnDelete || x.partition != beforePartition
	if !spec && x.out == beforeOut {
		return true
	}
	if spec {
		x.generation++
	}
	newObj := w.object(x)
	rep := w.reps[i]
	rep.clock.SetTime(w.now.Add(rep.skew))
	w.deciding = rep.skew
	defer func() { w.deciding = 0 }()
	resp := rep.handler.Handle(context.Background(), w.request(x, admissionv1.Update, user, newObj, oldObj))
	w.tracef("%s %s tag %d→%d replicas %d→%d guard %s→%s by %s via %d: allowed=%t %s", x.kind, x.ref(), beforeT.tag, x.t.tag, beforeReplicas, x.replicas,
		guardLabel(beforeOut), guardLabel(x.out), user, i, resp.Allowed, resp.Result.Message)
	if !resp.Allowed {
		if ex := w.exception(user); ex != "" && exemption(user, w.now.Add(w.deciding)) != "" {
			w.violate("%s (%s) was refused: %s", user, ex, resp.Result.Message)
		}
		if (beforeOut || w.nsOut[x.ns]) && w.outside(x) {
			w.violate("%s %s's change, while no policy selected it, was refused: %s", x.kind, x.ref(), resp.Result.Message)
		}
		x.t, x.replicas = beforeT, beforeReplicas
		if spec {
			x.generation--
		}
		x.paused, x.onDelete, x.partition, x.out = beforePaused, beforeOnDelete, beforePartition, beforeOut
		return false
	}
	w.version++
	if x.t.tag == beforeT.tag && x.t != beforeT && x.replicas != beforeReplicas {
		w.noteFlagScale(x, beforeReplicas, user)
	}
	if !heldBefore && x.held() {
		x.heldAt, x.heldT = w.now, beforeT
	}
	// A start is what makes kube create pods of the template: an edit of a workload that is
	// not held, a release (a resume, OnDelete back to RollingUpdate, a partition lowered) and
	// a scale up of an OnDelete StatefulSet, whose new ordinals get its template
	// (newVersionedStatefulSetPod) when it has none yet: more pods of a template that has
	// some start nothing (their first came from a replaced pod, the known gap
	// stagedTemplatePods, and a scale up takes no pod down). An edit of a held workload
	// only stages its template.
	hasPods := slices.ContainsFunc(x.pods, func(p *mpod) bool { return p.Template.tag == x.t.tag })
	release := (heldBefore && !x.held()) || (x.kind == v1alpha1.KindStatefulSet && x.partition < beforePartition && !x.held()) ||
		(x.kind == v1alpha1.KindStatefulSet && x.onDelete && x.replicas > beforeReplicas && !hasPods)
	switch {
	case x.t.tag != beforeT.tag && !x.held():
		w.started(x, beforeT, user)
	case release:
		// A flag-following scale staged on the hold is rolled out by the release, which
		// the rules judge as a start (checkThirdTemplate): F3 leaves it to them.
		delete(x.flagScaled, x.t)
		progressed := x.progressed
		w.started(x, x.other(), user)
		switch {
		case !heldBefore:
			// A partition lowered under a rollout that could roll (not held: some ordinal
			// was to update) lifts no hold: the stall clock runs on (journal.Revision's
			// Progressed restarts when a hold lifts, and a partition below the replicas is
			// none, workload.Rollout.Held).
			x.progressed = progressed
		case x.t == x.heldT:
			x.liftedAt = w.now
			// The rollout held goes on: its stall clock restarts where the hold stopped it
			// (the single explorer's liftHold). holdfast restarts it at the lift it sees,
			// later; a hold too short for the leader to see moves it by less than the lag.
			if x.progressed = progressed.Add(w.now.Sub(x.heldAt)); x.progressed.After(w.now) {
				x.progressed = w.now
			}
		}
	case x.t.tag != beforeT.tag && x.rolling():
		x.admitted[x.t.tag] = x.admitted[beforeT.tag] // the rollout it holds is the one counted
	case x.t.tag != beforeT.tag:
		x.admitted[x.t.tag] = fexcuse{fleet: stagedTemplatePods, shared: stagedTemplatePods}
	}
	if x.replicas < beforeReplicas {
		x.scaledDown = w.now
		if w.recentEvictions(x) > 0 {
			x.excused = true // see evict
		}
	}
	if x.replicas != beforeReplicas {
		x.maxReady = 0
		for _, p := range x.pods {
			if w.ready(p) {
				x.maxReady++
			}
		}
		x.maxReady = min(x.maxReady, x.want())
	}
	return true
}

// noteFlagScale notes an admitted flag-following scale of x, from beforeReplicas, by
// user: why F3 excuses its template's first pods beside two others. A scale towards a
// template that has pods makes none new; one admitted over a stalled rollout is let past
// (checkScaleDuringRollout); one staged on a held workload gets its first pods when kube
// replaces a pod of an OnDelete or partitioned one (the known gap stagedTemplatePods) or
// at the release, which is judged as a start; but a scale up of an OnDelete StatefulSet
// creates its new ordinals from it at once (growsHeld), judged as the scale.
func (w *fworld) noteFlagScale(x *fwl, beforeReplicas int, user string) {
	w.recreates.flagAdmitted++
	if len(x.live) > 1 {
		w.recreates.flagRolling++
	}
	grows := x.kind == v1alpha1.KindStatefulSet && x.onDelete && x.replicas > beforeReplicas
	ex := w.exception(user)
	switch {
	case ex != "":
	case w.outside(x):
		ex = "unselected"
	case slices.ContainsFunc(x.pods, func(p *mpod) bool { return p.Template == x.t }):
		ex = "has pods"
	case w.stalled(x):
		ex = "the fix of a stalled rollout"
	case x.held() && !grows:
		ex = stagedTemplatePods
	}
	x.flagScaled[x.t] = ex
}

// guardLabel is the value of the label the policy selects on: off for a workload out.
func guardLabel(out bool) string { return map[bool]string{false: "on", true: "off"}[out] }

// started notes an admitted start: why the invariants excuse it, and F2's start half. A
// start of a workload out of the selection is no policy's to judge: "unselected" excuses
// it, as an exempt requester's start (its rollout is judged from the entry, enter).
func (w *fworld) started(x *fwl, before tmpl, user string) {
	base := w.exception(user)
	if base == "" && w.outside(x) {
		base = "unselected"
	}
	hasPods := slices.ContainsFunc(x.pods, func(p *mpod) bool { return p.Template.tag == x.t.tag })
	switch {
	case base != "":
	case !slices.ContainsFunc(x.pods, func(p *mpod) bool { return p.Template != x.t }):
		// Every pod runs it already (a return before the template it leaves got a pod, a
		// partition lowered over pods all on it), Ready or not: kube replaces none.
		base = "starts nothing"
	case w.stalled(x):
		base = "the fix of a stalled rollout"
	case x.t.tag == x.prev && x.unfinished(w) && hasPods:
		base = "a cancel"
	}
	a := fexcuse{fleet: base, shared: base}
	if had := x.admitted[x.t.tag]; x.continues && base == "" {
		// A CREATE with the template the deleted workload had: the rollout of it goes on as
		// that workload's start was admitted (revisionsOf), by an exempt requester or under
		// Warn too, before kube made a pod of it (the orphaning delete came first): that
		// start's excuse is this one's.
		if a.fleet == "" {
			a.fleet = had.fleet
		}
		if a.shared == "" {
			a.shared = had.shared
		}
	}
	if a.shared == "" && x.continues && hasPods {
		// A CREATE with the template the deleted workload had, over pods of it: the rollout
		// it adopts started when that template got its first pods (F2 judged that start), and
		// holdfast judges this one as that rollout going on (revisionsOf), not a start.
		a.shared = "continues the rollout it adopts"
	}
	if a.shared == "" && w.cfg.shared {
		w.checkStartBudget(x)
	}
	if base != "" && w.cfg.shared {
		x.excused = true
	}
	x.admitted[x.t.tag] = a
	if base == "" {
		x.countedAt = w.now
	}
	x.prev, x.best, x.progressed, x.lastStart = before.tag, 0, w.now, w.now
}

// checkStartBudget is F2's start half: a rollout the shared budget governs does not start
// within the cooldown of an eviction of a Ready pod of its group, nor while pods evicted
// in the last moments (their replacements not Ready yet) fill the budget.
func (w *fworld) checkStartBudget(x *fwl) {
	if len(x.evictions) == 0 {
		return
	}
	w.checked["F2start"]++
	last := x.evictions[len(x.evictions)-1]
	if w.cfg.cooldown > 0 && w.now.Sub(last) < w.cfg.cooldown {
		w.violate("F2: %s %s started a rollout %s after an eviction of its pods, within the shared cooldown of %s",
			x.kind, x.ref(), w.now.Sub(last), w.cfg.cooldown)
	}
	if n, limit := w.evictedDown(x), groupBudget(w.cfg.budget, x.want()); n >= max(limit, 1) {
		w.violate("F2: %s %s started a rollout while %d of its pods evicted in the last %s were down, its whole shared budget of %d",
			x.kind, x.ref(), n, fGrace+5*time.Second, limit)
	}
}

// recentEvictions counts the evictions of Ready pods of x whose pods may not be replaced
// and Ready yet (termination and the slowest readiness).
func (w *fworld) recentEvictions(x *fwl) int {
	n := 0
	for _, e := range x.evictions {
		if w.now.Sub(e) < fGrace+5*time.Second {
			n++
		}
	}
	return n
}

// evictedDown counts the recent evictions of x whose pods are down: a StatefulSet ordinal
// or a DaemonSet node without a Ready pod; for a Deployment, whose replacements have no
// slot, as many as the group has pods down.
func (w *fworld) evictedDown(x *fwl) int {
	if x.kind == v1alpha1.KindDeployment {
		return min(w.recentEvictions(x), w.down(x))
	}
	n := 0
	for i, e := range x.evictions {
		if w.now.Sub(e) < fGrace+5*time.Second && !slices.ContainsFunc(x.pods, func(p *mpod) bool { return p.Slot == x.evictedSlots[i] && w.ready(p) }) {
			n++
		}
	}
	return n
}

// evict sends the eviction of pod p of x through replica j of the eviction guard (the real
// Handler and Decide); an admitted one makes the pod terminate.
func (w *fworld) evict(x *fwl, p *mpod, j int) bool {
	if p.Terminating {
		return false
	}
	ev := w.evictors[j]
	ev.clock.SetTime(w.now.Add(ev.skew))
	body := mustMarshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: x.ns, Name: x.podName(p)}})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "e",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: x.ns, Name: x.podName(p), Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body}, DryRun: ptr.To(false),
		UserInfo: authenticationv1.UserInfo{Username: fDrainer}}}
	resp := ev.h.Handle(context.Background(), req)
	w.tracef("evict %s/%s (%v ready=%t): allowed=%t %s", x.ns, x.podName(p), p.Template.tag, w.ready(p), resp.Allowed, resp.Result.Message)
	if !resp.Allowed {
		return false
	}
	if w.ready(p) {
		x.guardAdmitted = w.now
	}
	if w.cfg.pdb && !w.kubeAdmits(x, p) {
		w.checked["kubePDBRefused"]++
		if w.ready(p) {
			x.refused = append(x.refused, refusedEviction{at: w.now, p: p})
		}
		w.tracef("kube's PDB check refused the eviction holdfast admitted")
		return false
	}
	if w.ready(p) {
		x.evictions, x.evictedSlots = append(x.evictions, w.now), append(x.evictedSlots, p.Slot)
	}
	if !x.scaledDown.IsZero() && w.now.Sub(x.scaledDown) <= mMaxLag {
		// A scale down shrinks the budget, and the eviction guard resolves it against the
		// replicas its cache shows (as kube's disruption controller does, from a status that
		// lags too): within a cache's lag of a scale down, evictions are admitted against the
		// scale before it, and a scale down beside evictions leaves their pods down.
		x.excused = true
	}
	p.Terminating = true
	x.goneAt[p] = w.now.Add(fGrace)
	w.version++
	return true
}

// kubeAdmits is kube's PDB check after the eviction guard admitted an eviction of p
// (kubemodel.PDBAllows), over x's pods: its expected count is the workload's replicas or a
// DaemonSet's nodes, its budget maxUnavailable rounded up.
func (w *fworld) kubeAdmits(x *fwl, p *mpod) bool {
	if x.disrupted == nil {
		x.disrupted = map[*mpod]time.Time{}
	}
	for q, at := range x.disrupted {
		if w.now.Sub(at) > kubemodel.DeletionTimeout || !slices.Contains(x.pods, q) {
			delete(x.disrupted, q)
		}
	}
	floor := w.cfg.pdbBudget == w.cfg.budget // holdfast's generated PDB, else an operator's
	if x.kind == v1alpha1.KindDaemonSet && !floor {
		// An operator's maxUnavailable over a DaemonSet's pods: kube cannot scale a
		// DaemonSet, so the disruption controller fails safe, allowing no disruption
		// (disruption.go getExpectedPodCount, failSafe); holdfast's generator writes an
		// integer minAvailable for one instead (pdb.Desired).
		return false
	}
	desired := x.want() - groupBudget(w.cfg.pdbBudget, x.want())
	healthy := 0
	for _, q := range x.pods {
		if _, gone := x.disrupted[q]; w.ready(q) && !q.Terminating && !gone {
			healthy++
		}
	}
	// unhealthyPodEvictionPolicy: AlwaysAllow on the PDBs holdfast generates,
	// IfHealthyBudget (kube's default) on an operator's.
	allowed, disrupts := kubemodel.PDBAllows(w.ready(p), healthy, desired, floor)
	if disrupts {
		x.disrupted[p] = w.now
	}
	return allowed
}

func (w *fworld) step(op fop) {
	w.ops = append(w.ops, op)
	x := w.ws[op.W%len(w.ws)]
	w.tracef("op %s on %s %s", op, x.kind, x.ref())
	i := op.Repl % 2
	edit := func(user string) {
		tag := w.nextTag
		w.nextTag++
		x.broken[tag] = op.N%6 == 0
		w.send(i, x, func() { x.t = x.with(tag) }, user)
	}
	switch op.Kind {
	case "edit":
		edit(mOperator)
	case "editAs":
		edit([]string{mBreakGlass, mOnCall, mOperator}[op.N%3])
	case "editOld":
		if tag := 1 + op.N%max(1, w.nextTag-1); x.hasRevision(tag) {
			w.send(i, x, func() { x.t = x.with(tag) }, mOperator)
		}
	case "scale":
		if n := 2 + op.N%3; x.kind != v1alpha1.KindDaemonSet && n != x.replicas {
			w.send(i, x, func() { x.replicas = n }, mOperator)
		}
	case "evict", "evictEdit":
		if len(x.pods) > 0 {
			w.evict(x, x.pods[op.N%len(x.pods)], i)
		}
		if op.Kind == "evictEdit" {
			// A drain and a release at once: the rollout right after the eviction.
			w.advance(time.Duration(op.N%3) * time.Second)
			edit(mOperator)
		}
	case "race":
		// Two starts of different workloads through the two replicas at once: the second is
		// decided and recorded between the first's read of the ledgers and its write.
		y := w.ws[(op.W+1)%len(w.ws)]
		w.ledger.onRead = func() {
			tag := w.nextTag
			w.nextTag++
			w.send(1-i, y, func() { y.t = y.with(tag) }, mOperator)
		}
		edit(mOperator)
		w.ledger.onRead = nil
	case "raceEvict":
		// An eviction of a pod of x decided while the start of x's rollout is.
		if len(x.pods) > 0 {
			p := x.pods[op.N%len(x.pods)]
			w.ledger.onRead = func() { w.evict(x, p, i) }
		}
		edit(mOperator)
		w.ledger.onRead = nil
	case "raceStart":
		// The start of x's rollout decided while an eviction of its pod is.
		w.ledger.onRead = func() {
			tag := w.nextTag
			w.nextTag++
			w.send(i, x, func() { x.t = x.with(tag) }, mOperator)
		}
		if len(x.pods) > 0 {
			w.evict(x, x.pods[op.N%len(x.pods)], i)
		}
		w.ledger.onRead = nil
	case "tick":
		w.advance(time.Duration(1+op.N%20) * time.Second)
	case "sync":
		if op.N%3 == 2 {
			w.syncEvictor(i)
		} else {
			w.sync(i)
		}
	case "pause":
		if x.kind == v1alpha1.KindDeployment {
			w.send(i, x, func() { x.paused = true }, mOperator)
		}
	case "resume":
		w.send(i, x, func() { x.paused, x.onDelete = false, false }, mOperator)
	case "onDelete":
		if x.kind != v1alpha1.KindDeployment {
			w.send(i, x, func() { x.onDelete = true }, mOperator)
		}
	case "rollingUpdate":
		w.send(i, x, func() { x.onDelete, x.partition = false, 0 }, mOperator)
	case "partition":
		if x.kind == v1alpha1.KindStatefulSet {
			w.send(i, x, func() { x.partition = op.N % (x.replicas + 1) }, mOperator)
		}
	case "holdRelease":
		// A template staged on a held workload and released while another workload rolls
		// out: the release (a resume, OnDelete back to RollingUpdate, a partition lowered)
		// is a start the fleet limit and the shared budget judge.
		var hold, release func()
		switch x.kind {
		case v1alpha1.KindDeployment:
			hold, release = func() { x.paused = true }, func() { x.paused = false }
		case v1alpha1.KindStatefulSet:
			if op.N%2 == 0 {
				hold, release = func() { x.partition = x.replicas }, func() { x.partition = op.N / 2 % x.replicas }
				break
			}
			fallthrough
		default:
			hold, release = func() { x.onDelete = true }, func() { x.onDelete = false }
		}
		if !w.send(i, x, hold, mOperator) {
			return
		}
		w.advance(mMaxLag + time.Second)
		edit(mOperator)
		w.advance(mMinInterval + time.Duration(op.N%3)*time.Second)
		y := w.ws[(op.W+1)%len(w.ws)]
		tag := w.nextTag
		w.nextTag++
		w.send(1-i, y, func() { y.t = y.with(tag) }, mOperator)
		w.advance(time.Duration(1+op.N%3) * time.Second)
		w.send(i, x, release, mOperator)
	case "policy":
		w.mode = []v1alpha1.Mode{v1alpha1.ModeEnforce, v1alpha1.ModeEnforce, v1alpha1.ModeWarn}[op.N%3]
		w.policyAt = w.now
		w.version++
	case "relabel":
		w.relabel(x, op)
	case "nsRelabel":
		w.relabelNamespace(x, op)
	case "recreate":
		w.recreate(x, op)
	case "scaleFlag":
		w.scaleFlag(op)
	}
}

// relabel is the relabel walk's step (the single explorer's relabel and relabelIn, for one
// workload of the fleet): x comes back in when it is out; else, while another workload is
// out, four in five bring that one in; else x leaves.
func (w *fworld) relabel(x *fwl, op fop) {
	i := op.Repl % 2
	if w.nsOut[x.ns] {
		return // the namespace walk's: no policy selects x whatever its labels
	}
	if x.out {
		w.enter(x, i, op.N)
		return
	}
	if j := slices.IndexFunc(w.ws, func(y *fwl) bool { return y.out && !w.nsOut[y.ns] }); j >= 0 && op.N%5 != 0 {
		w.enter(w.ws[j], i, op.N)
		return
	}
	w.leave(x, i, op.N)
}

// noteSelection logs a relabel admitted now, which took the selection from before.
func (w *fworld) noteSelection(before int) {
	w.selLog = append(w.selLog, selChange{at: w.now, before: before, after: w.selected()})
}

// leave takes x out of the policy's selection, then changes its template outside it. The
// operator's relabel out is refused under a policy in force (decide.go: a relabel, then a
// free change, walks around every rule), so an exempt requester's relabels it, as the
// single explorer's relabel-in walk does; the operator's, admitted, must be excused
// (Warn, a policy changed within a cache's lag). Outside, n picks a new template (one in
// six of them never Ready), a return to the template its last start replaced, or none (the
// generated operations may change it later); both are admitted at once, no policy
// selecting it, and kube rolls them out. Half the walks then wait, up to 40 s, for the
// rollout to finish.
func (w *fworld) leave(x *fwl, i, n int) {
	before := w.selected()
	if w.send(i, x, func() { x.out = true }, mOperator) {
		w.relabels.outByOperator++
		if ex := w.exception(mOperator); ex == "" {
			w.violate("the operator's relabel of %s %s out of the policy's selection was admitted", x.kind, x.ref())
		}
	} else if !w.send(i, x, func() { x.out = true }, mBreakGlass) {
		return // send reports the exempt requester refused
	}
	w.relabels.left++
	x.leftT = x.t
	w.noteSelection(before)
	w.advance(time.Second)
	tag := x.t.tag
	switch {
	case n%3 == 1 && x.prev != x.t.tag && x.hasRevision(x.prev) && !x.broken[x.prev]:
		tag = x.prev
	case n%3 != 2:
		tag = w.nextTag
		w.nextTag++
		x.broken[tag] = (n/3)%6 == 0
	}
	if tag != x.t.tag && !w.send(i, x, func() { x.t = x.with(tag) }, mOperator) {
		return // send reports it: no policy selects x
	}
	if (n/3)%2 == 0 {
		for end := w.now.Add(40 * time.Second); w.now.Before(end) && x.unfinished(w); {
			w.advance(time.Second)
		}
	}
}

// enter brings x back into the policy's selection: the operator's relabel, which holdfast
// judges on what it brings (checkEntering: refused while its rollout outside is unfinished
// or two templates have live pods; checkEnteredChange: a template other than the journal's
// current counts as made now, under minInterval, revertWindow and the windows). Refused,
// the operator retries every mRetry as the refusal says (once the rollout finished, after
// minInterval, revertWindow or the window); past the relabel-in walk's longest wait, the
// other way out it names, an exempt requester's relabel, is admitted at once. One in four
// entries of the walks (n) first try to bring a new, working template in the same update:
// an entry and a start at once, which the fleet limit and the shared budget judge too
// (send counts the start as any edit's); refused, the operator relabels it alone.
//
// F1 and the entry: an entry starts nothing in kube's terms, yet it puts x's rollout, if
// it still runs, among the selected workloads rolling. So an entry no exception excuses
// (the operator's, admitted) counts x's rollout from the entry, as a start admitted then:
// holdfast admitting an entry that puts more than maxInFlight selected workloads rolling
// at once breaks F1 (checkEntering refuses an unfinished rollout, so none should). An
// exempt requester's entry, or one under Warn, is excused as its start would be.
func (w *fworld) enter(x *fwl, i, n int) {
	before := w.selected()
	deadline := w.now.Add(mRevert + time.Minute + 2*mMaxLag)
	refused := false
	if (n/5)%4 == 3 && !x.held() {
		tag := w.nextTag
		w.nextTag++
		if w.send(i, x, func() { x.out, x.t = false, x.with(tag) }, mOperator) {
			w.relabels.entered++
			w.relabels.withEdit++
			w.relabels.changed++
			w.noteSelection(before)
			x.enteredAt = w.now // started noted the start: its excuse, F2's start half, lastStart
			return
		}
		w.relabels.refusals++
		refused = true
	}
	user, again, ok := w.untilAdmitted(deadline, &w.relabels.refusals, func(try int, user string) bool {
		return w.send((i+try)%2, x, func() { x.out = false }, user)
	})
	if !ok {
		return
	}
	refused = refused || again
	w.relabels.entered++
	if refused {
		w.relabels.refused++
	}
	if user == mBreakGlass {
		w.relabels.exempt++
	}
	if x.t != x.leftT {
		w.relabels.changed++
	}
	w.noteSelection(before)
	ex := w.exception(user)
	x.admitted[x.t.tag] = fexcuse{fleet: ex, shared: ex}
	if ex == "" {
		x.countedAt = w.now
	}
	// The leader records the entered template as current when it sees it (a rebuilt
	// journal may date it from then too): minInterval and the stall clock may run from it.
	x.lastStart, x.enteredAt = w.now, w.now
}

// outside is whether no policy selects x for its labels or for its namespace's.
func (w *fworld) outside(x *fwl) bool { return x.out || w.nsOut[x.ns] }

// namespace is namespace ns as the API server holds it: in the policy's namespace
// selection unless a namespace walk took it out.
func (w *fworld) namespace(ns string) *corev1.Namespace {
	labels := map[string]string{corev1.LabelMetadataName: ns}
	if !w.nsOut[ns] {
		labels[mTierLabel] = "hosted"
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: types.UID("ns-" + ns), Labels: labels}}
}

// relabelNamespace is the namespace walk, the relabel walk (relabel) through the labels of
// x's namespace, which holdfast judges in HandleNamespace: every workload of it goes out
// and comes back in at once (under maxInFlightPerNamespace, several). Moving a namespace
// out is an administrator's change to what policies cover, never refused; the entry is
// judged on what each workload brings (checkEntering, checkEnteredChange), and F1 and F2
// count it as enter does.
func (w *fworld) relabelNamespace(x *fwl, op fop) {
	if w.nsOut[x.ns] {
		w.enterNamespace(x.ns, op.Repl%2)
		return
	}
	w.leaveNamespace(x.ns, op.Repl%2, op.N)
}

// inNamespace are the workloads of namespace ns that exist.
func (w *fworld) inNamespace(ns string) []*fwl {
	var out []*fwl
	for _, x := range w.ws {
		if x.ns == ns && !x.gone {
			out = append(out, x)
		}
	}
	return out
}

// leaveNamespace takes namespace ns out of the policy's namespace selection, then changes
// the templates of its workloads outside it as leave does (n picks, per workload: a new
// template, one in six of them never Ready; a return to the template its last start
// replaced; or none), all admitted at once, no policy selecting them. Half the walks then
// wait, up to 40 s, for their rollouts to finish.
func (w *fworld) leaveNamespace(ns string, i, n int) {
	before := w.selected()
	if !w.sendNamespace(i, ns, true, mOperator) {
		return // sendNamespace reports it
	}
	w.relabels.nsLeft++
	w.noteSelection(before)
	// A replica whose cache still shows the namespace in judges the workloads' changes under
	// the policy (a request does not carry its namespace's labels): conservative, for at
	// most the lag. The operator's changes come after it, when no policy may refuse them.
	w.advance(mMaxLag + time.Second)
	for k, x := range w.inNamespace(ns) {
		if x.out {
			continue // the relabel walk's: it left with its own template
		}
		x.leftT = x.t
		m := n + 7*k
		tag := x.t.tag
		switch {
		case m%3 == 1 && x.prev != x.t.tag && x.hasRevision(x.prev) && !x.broken[x.prev]:
			tag = x.prev
		case m%3 != 2:
			tag = w.nextTag
			w.nextTag++
			x.broken[tag] = (m/3)%6 == 0
		}
		if tag != x.t.tag {
			w.send(i, x, func() { x.t = x.with(tag) }, mOperator) // send reports a refusal
		}
	}
	if (n/3)%2 == 0 {
		for end := w.now.Add(40 * time.Second); w.now.Before(end) &&
			slices.ContainsFunc(w.inNamespace(ns), func(x *fwl) bool { return x.unfinished(w) }); {
			w.advance(time.Second)
		}
	}
}

// enterNamespace brings namespace ns back into the policy's namespace selection: the
// operator's relabel, retried every mRetry while refused, then, past the relabel walks'
// longest wait, an exempt requester's. Each workload it brings in is noted as enter notes
// one: counted by F1 from the entry unless an exception excuses it.
func (w *fworld) enterNamespace(ns string, i int) {
	before := w.selected()
	deadline := w.now.Add(mRevert + time.Minute + 2*mMaxLag)
	user, refused, ok := w.untilAdmitted(deadline, &w.relabels.refusals, func(try int, user string) bool {
		return w.sendNamespace((i+try)%2, ns, false, user)
	})
	if !ok {
		return
	}
	w.relabels.nsEntered++
	if refused {
		w.relabels.nsRefused++
	}
	if user == mBreakGlass {
		w.relabels.nsExempt++
	}
	w.noteSelection(before)
	ex := w.exception(user)
	for _, x := range w.inNamespace(ns) {
		if x.out {
			continue // its own labels keep it out
		}
		w.relabels.nsWorkloads++
		if x.t != x.leftT {
			w.relabels.nsChanged++
		}
		x.admitted[x.t.tag] = fexcuse{fleet: ex, shared: ex}
		if ex == "" {
			x.countedAt = w.now
		}
		x.lastStart, x.enteredAt = w.now, w.now
	}
}

// sendNamespace sends the relabel of namespace ns out of the policy's namespace selection
// (out) or back into it, by user, through rollout replica i's namespace handler
// (HandleNamespace), and applies it when admitted. A relabel out refused, or an exempt
// requester's refused, is a violation.
func (w *fworld) sendNamespace(i int, ns string, out bool, user string) bool {
	oldNs := w.namespace(ns)
	w.nsOut[ns] = out
	newNs := w.namespace(ns)
	w.nsOut[ns] = !out
	rep := w.reps[i]
	rep.clock.SetTime(w.now.Add(rep.skew))
	w.deciding = rep.skew
	defer func() { w.deciding = 0 }()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: types.UID(fmt.Sprint(len(w.ops))), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Name: ns, Operation: admissionv1.Update,
		DryRun: ptr.To(false), UserInfo: authenticationv1.UserInfo{Username: user},
		Object: runtime.RawExtension{Raw: mustMarshal(newNs)}, OldObject: runtime.RawExtension{Raw: mustMarshal(oldNs)},
	}}
	resp := rep.handler.HandleNamespace(context.Background(), req)
	w.tracef("namespace %s out %t→%t by %s via %d: allowed=%t %s", ns, !out, out, user, i, resp.Allowed, resp.Result.Message)
	if !resp.Allowed {
		switch {
		case out:
			w.violate("the relabel of namespace %s out of the policy's selection was refused: %s", ns, resp.Result.Message)
		case w.exception(user) != "" && exemption(user, w.now.Add(w.deciding)) != "":
			w.violate("%s's relabel of namespace %s into the policy's selection was refused: %s", user, ns, resp.Result.Message)
		}
		return false
	}
	w.nsOut[ns] = out
	w.version++
	return true
}

// recreate deletes x and creates it again under its name through the webhook (the single
// explorer's recreate, for one workload of the fleet). Half the deletes orphan
// (kubectl delete --cascade=orphan: the garbage collector's orphanDependents,
// pkg/controller/garbagecollector/garbagecollector.go, leaves its revisions and pods
// without an owner, and the new workload adopts them: a Deployment its ReplicaSets, a
// StatefulSet or DaemonSet its pods and ControllerRevisions), half cascade (the garbage
// collector deletes them, attemptToDeleteItem: the pods terminate, and are gone before the
// CREATE, so the new one adopts none, as a ReplicaSet claims active pods only,
// pkg/controller/replicaset/replica_set.go, FilterActivePods before claimPods; nor do the
// evictions of the pods deleted hold the new group's). The CREATE brings the template x had
// or, two in three, a new one (one in six of them never Ready), without the holds it had
// (the manifest's RollingUpdate). holdfast judges it: a CREATE that adopts pods of another
// template, or starts a new template over them, starts a rollout kube runs as any other,
// which the fleet limit and the shared budget count (Decision.Starts); F1 counts it from
// the CREATE (started). Refused, the operator retries every mRetry with the template it
// had, which holdfast admits once the rollout it adopts may go on; past the relabel walks'
// longest wait, an exempt requester creates it.
func (w *fworld) recreate(x *fwl, op fop) {
	if w.outside(x) || x.gone {
		return // the relabel walks' own
	}
	i := op.Repl % 2
	orphan := op.N%2 == 0
	had := x.t
	before := w.selected()
	x.lastObj, x.gone = w.object(x), true
	w.version++
	w.noteSelection(before)
	w.tracef("delete %s %s (orphan=%t)", x.kind, x.ref(), orphan)
	if orphan {
		w.recreates.orphan++
		w.advance(time.Second)
	} else {
		w.recreates.cascade++
		for _, p := range x.pods {
			if !p.Terminating {
				p.Terminating = true
				x.goneAt[p] = w.now.Add(fGrace)
			}
		}
		w.advance(fGrace + time.Second)
		// The garbage collector deleted its revisions too: a workload created now makes
		// them anew, numbered from 1.
		x.sets, x.revisions, x.created, x.maxReady = nil, map[tmpl]int64{}, map[tmpl]time.Time{}, 0
		// Its group is new pods, under kube's PDB anew; its evictions are those of the
		// workload of its name, which holdfast counts across the re-create (budget.GroupID):
		// the pods deleted were that workload's, disrupted as any.
		x.disrupted = nil
	}
	t := had
	if (op.N/2)%3 != 0 {
		tag := w.nextTag
		w.nextTag++
		x.broken[tag] = (op.N/6)%6 == 0
		t = x.with(tag)
		w.recreates.newTemplate++
	}
	deadline := w.now.Add(mRevert + time.Minute + 2*mMaxLag)
	// A refused CREATE is retried with the template it had.
	user, refused, _ := w.untilAdmitted(deadline, &w.recreates.refusals, func(try int, user string) bool {
		if w.create((i+try)%2, x, t, user) {
			return true
		}
		t = had
		return false
	})
	w.recreates.admitted++
	if refused {
		w.recreates.refused++
	}
	if user == mBreakGlass {
		w.recreates.exempt++
	}
	if a := x.admitted[x.t.tag]; a.fleet == "" && slices.ContainsFunc(x.pods, func(p *mpod) bool { return p.Template.tag != x.t.tag }) {
		w.recreates.counted++
	}
}

// request is the API server's admission request for op on x by user: its object, and on
// an UPDATE the object it replaces.
func (w *fworld) request(x *fwl, op admissionv1.Operation, user string, obj, old client.Object) admission.Request {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: types.UID(fmt.Sprint(len(w.ops))), Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: string(x.kind)},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: workload.Resource(x.kind)},
		Name:     x.name, Namespace: x.ns, Operation: op, DryRun: ptr.To(false),
		UserInfo: authenticationv1.UserInfo{Username: user},
		Object:   runtime.RawExtension{Raw: mustMarshal(obj)},
	}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustMarshal(old)}
	}
	return req
}

// untilAdmitted sends a request until it is admitted: as the operator every mRetry, as the
// exempt requester once deadline has passed. refusals counts the refusals. It reports who
// was admitted, whether a refusal came first, and false when the exempt requester was
// refused too (send reported it).
func (w *fworld) untilAdmitted(deadline time.Time, refusals *int, send func(try int, user string) bool) (user string, refused, ok bool) {
	user = mOperator
	for try := 0; !send(try, user); try++ {
		if user == mBreakGlass {
			return user, refused, false
		}
		*refusals++
		refused = true
		if w.now.After(deadline) {
			user = mBreakGlass
			continue
		}
		w.advance(mRetry)
	}
	return user, refused, true
}

// create sends the CREATE of deleted workload x with template t, by user, through rollout
// replica i; admitted, the API server stores it (a new object: a new UID, generation 1,
// no status yet) and kube's controller adopts what its predecessor left, a StatefulSet
// taking its update revision as current (a created StatefulSet has no
// status.currentRevision: getStatefulSetRevisions in
// pkg/controller/statefulset/stateful_set_control.go). An exempt requester's
// CREATE refused is a violation, and stored anyway, so that the sequence goes on.
func (w *fworld) create(i int, x *fwl, t tmpl, user string) bool {
	beforeT, beforeGen, beforeObserved := x.t, x.generation, x.observed
	beforePaused, beforeOnDelete, beforePartition := x.paused, x.onDelete, x.partition
	x.gone, x.t, x.generation, x.observed = false, t, 1, 0
	x.paused, x.onDelete, x.partition = false, false, 0
	x.incarnation++
	newObj := w.object(x)
	rep := w.reps[i]
	rep.clock.SetTime(w.now.Add(rep.skew))
	w.deciding = rep.skew
	defer func() { w.deciding = 0 }()
	resp := rep.handler.Handle(context.Background(), w.request(x, admissionv1.Create, user, newObj, nil))
	w.tracef("create %s %s tag %d (had %d) by %s via %d: allowed=%t %s", x.kind, x.ref(), t.tag, beforeT.tag, user, i, resp.Allowed, resp.Result.Message)
	if !resp.Allowed {
		if exemption(user, w.now.Add(w.deciding)) == "" {
			x.gone, x.t, x.generation, x.observed = true, beforeT, beforeGen, beforeObserved
			x.paused, x.onDelete, x.partition = beforePaused, beforeOnDelete, beforePartition
			x.incarnation--
			return false
		}
		w.violate("%s's CREATE of %s %s was refused: %s", user, x.kind, x.ref(), resp.Result.Message)
	}
	w.version++
	w.noteSelection(w.selected() - 1)
	if x.kind == v1alpha1.KindStatefulSet {
		x.current = x.t
	}
	// What it adopts rolls on from where it was: a CREATE with the template it had keeps
	// that rollout's stall clock; started notes the CREATE as the start F1 counts (none when
	// every pod it adopts runs its template).
	x.createdAt = w.now
	progressed, best, prev := x.progressed, x.best, x.prev
	x.continues = x.t == beforeT && !beforePaused && !beforeOnDelete && beforePartition == 0
	w.started(x, x.other(), user)
	x.continues = false
	if x.t == beforeT && len(x.pods) > 0 {
		x.progressed, x.best, x.prev = progressed, best, prev
	}
	return true
}

// scaleFlag is a flag-following scale (argsMatchReplicas): the replicas and the
// konnectivity-server's --server-count changed together, of a workload that runs it (the
// first flagged one from op.W on; none: nothing). Half of them, when another template of
// the image has live pods, scale back to its count (a scale towards a template that still
// has pods). holdfast must admit it as no new revision (I4: it takes no slot of the fleet
// limit and spends no shared budget), and during an unfinished rollout only towards a
// template that has pods or once the rollout stalled (checkScaleDuringRollout): F3.
func (w *fworld) scaleFlag(op fop) {
	var x *fwl
	for k := range w.ws {
		if y := w.ws[(op.W+k)%len(w.ws)]; y.t.count > 0 && !y.gone {
			x = y
			break
		}
	}
	if x == nil {
		return
	}
	n := 2 + op.N%3
	if n == x.replicas {
		n = 2 + (op.N+1)%3
	}
	if op.N%2 == 0 {
		for _, t := range x.live {
			if t.tag == x.t.tag && t.count != x.t.count && t.count > 0 {
				n = t.count
			}
		}
	}
	w.recreates.flagScales++
	// A scale up of a held StatefulSet creates its new ordinals from the staged template at
	// once (growsHeld): when no pod runs that image yet, the scale is its start.
	grows := x.kind == v1alpha1.KindStatefulSet && x.held() && n > x.replicas
	if !w.send(op.Repl%2, x, func() { x.replicas, x.t = n, tmpl{tag: x.t.tag, count: n} }, mOperator) {
		w.recreates.flagRefused++
		return
	}
	if w.cfg.concurrency == nil || w.outside(x) || grows {
		return
	}
	// I4 in the fleet: the scale takes no slot, so the fleet ledger holds no start of it
	// (a start recorded would hold other workloads' starts as one in flight).
	p := w.objects()[0].(*v1alpha1.RolloutPolicy)
	f, err := w.reps[0].handler.Ledgers.ReadFleet(context.Background(), p)
	if err != nil {
		panic(err)
	}
	w.checked["F1scale"]++
	if slices.ContainsFunc(f.Records, func(s budget.Start) bool { return s.UID == x.uid() && s.Generation == x.generation }) {
		w.violate("F1: %s %s's flag-following scale to %d replicas was recorded as a start in the fleet ledger: it would take a slot", x.kind, x.ref(), n)
	}
}

// unstick is the operator's way out of a Deployment kube itself leaves stuck
// (kubemodel.Workload.StaleScale, kubernetes/kubernetes#138036): a scale up by one and
// back, which holdfast admits (a scale starts nothing, I4). It is counted as the known
// gap kubeStaleDesiredReplicas: kube's, which no request of holdfast's makes.
func (w *fworld) unstick() bool {
	stuck := false
	for i, x := range w.ws {
		if !w.kube(x).StaleScale() {
			continue
		}
		stuck = true
		w.gaps["kubeStaleDesiredReplicas"]++
		n := x.replicas
		// One whose --server-count follows its replicas is unstuck by an exempt requester:
		// argsMatchReplicas refuses the operator's scale that leaves the flag behind.
		user := mOperator
		if x.t.count > 0 {
			user = mBreakGlass
		}
		for _, to := range []int{n + 1, n} {
			if !w.send(i%2, x, func() { x.replicas = to }, user) {
				w.violate("L1: %s %s: the scale to %d replicas that unsticks its rollout (kube's stale desired-replicas) was refused", x.kind, x.ref(), to)
			}
			w.advance(time.Second)
		}
	}
	return stuck
}

// operate is the scripted operator of L1. It fixes every rollout whose template never
// gets Ready (the fix of a stalled rollout, which neither the fleet limit nor the shared
// budget holds), waits until every rollout has finished, then wants a new template on one
// workload, retrying every mRetry: it must be admitted within the bound
// docs/invariants.md states.
func (w *fworld) operate() {
	rolloutTime := 0
	for _, x := range w.ws {
		rolloutTime = max(rolloutTime, x.want()+1)
	}
	settle := time.Duration(rolloutTime) * 6 * time.Second
	// Holds the sequence left (pauses, OnDelete, partitions) are lifted by an exempt
	// requester: the ways out of a hold are the single explorer's to prove.
	for _, x := range w.ws {
		if x.paused || x.onDelete || x.partition > 0 {
			w.send(0, x, func() { x.paused, x.onDelete, x.partition = false, false, 0 }, mBreakGlass)
		}
	}
	// The workloads a relabel walk left out come back in first, as enter brings them, and
	// so do the namespaces a namespace walk left out.
	for j, x := range w.ws {
		if x.out {
			w.enter(x, j%2, 0)
		}
	}
	for j, ns := range slices.Sorted(maps.Keys(w.nsOut)) {
		if w.nsOut[ns] {
			w.enterNamespace(ns, j%2)
		}
	}
	if w.releaseLiveness(settle) {
		return
	}
	deadline := w.now.Add(max(mStall, mMinInterval) + settle + 2*mMaxLag + 2*mRetry)
	for i := 0; ; i++ {
		fixed := true
		for _, x := range w.ws {
			if !x.broken[x.t.tag] {
				continue
			}
			tag := w.nextTag
			w.nextTag++
			if !w.send(i%2, x, func() { x.t = x.with(tag) }, mOperator) {
				fixed = false
			}
		}
		if fixed {
			break
		}
		if w.now.After(deadline) {
			w.deadlock = true
			w.violate("L1: the fix of a stalled rollout was still refused %s after the operator first tried", deadline.Sub(w.now))
			return
		}
		w.advance(mRetry)
	}
	for end := w.now.Add(settle + mMaxLag); slices.ContainsFunc(w.ws, func(x *fwl) bool { return x.unfinished(w) }); w.advance(time.Second) {
		if w.unstick() {
			end = w.now.Add(settle + mMaxLag)
		}
		if w.now.After(end) {
			w.deadlock = true
			w.violate("L1: rollouts of working templates did not finish within %s", settle)
			return
		}
	}
	x := w.ws[w.rng.IntN(len(w.ws))]
	from := w.now
	bound := w.admissionBound(x, from)
	w.checked["L1"]++
	for i := 0; ; i++ {
		tag := w.nextTag
		w.nextTag++
		if w.send(i%2, x, func() { x.t = x.with(tag) }, mOperator) {
			return
		}
		if w.now.After(bound) {
			w.deadlock = true
			w.violate("L1: %s %s's new template was still refused %s after every rollout finished", x.kind, x.ref(), w.now.Sub(from))
			return
		}
		w.advance(mRetry)
	}
}

// releaseLiveness is L2, the way out of a fleet held by stalled rollouts: their slots
// lapse stalledSlotLifetime after they stalled. With a rollout whose template never gets
// Ready left stalled, once the working rollouts finished, another workload's new template
// must be admitted within the bound: its release (the journal's last progress, which may
// lag mMaxLag, + stallAfter + the lifetime), then L1's bound. Lifetimes a sequence cannot
// outlive (the 1h default, 0s) are left to L1, which fixes the stalled rollouts first.
// It reports whether the sequence ended (a violation).
func (w *fworld) releaseLiveness(settle time.Duration) bool {
	lifetime := w.cfg.slotLifetime
	if w.cfg.concurrency == nil || lifetime == nil || *lifetime == 0 {
		return false
	}
	var stalled, working []*fwl
	for _, x := range w.ws {
		if x.broken[x.t.tag] && x.unfinished(w) {
			stalled = append(stalled, x)
		} else {
			working = append(working, x)
		}
	}
	if len(stalled) == 0 || len(working) == 0 {
		return false
	}
	for end := w.now.Add(settle + mMaxLag); slices.ContainsFunc(working, func(x *fwl) bool { return x.unfinished(w) }); w.advance(time.Second) {
		if w.now.After(end) {
			w.deadlock = true
			w.violate("L2: rollouts of working templates did not finish within %s", settle)
			return true
		}
	}
	from := w.now
	for _, x := range stalled {
		// holdfast restarts the stall clock at a hold's lift it saw (the model stops it
		// while held): the later of the two bounds when the slot lapses.
		// So does the leader at an entry with another template (it becomes current then).
		// And at a re-create (the new object's journal).
		from = maxTime(from, x.progressed.Add(mMaxLag+mStall+*lifetime), x.liftedAt.Add(mMaxLag+mStall+*lifetime),
			x.enteredAt.Add(mMaxLag+mStall+*lifetime), x.createdAt.Add(mMaxLag+mStall+*lifetime))
	}
	y := working[w.rng.IntN(len(working))]
	bound := w.admissionBound(y, from)
	w.checked["L2"]++
	for i := 0; ; i++ {
		tag := w.nextTag
		w.nextTag++
		if w.send(i%2, y, func() { y.t = y.with(tag) }, mOperator) {
			return false
		}
		if w.now.After(bound) {
			w.deadlock = true
			w.violate("L2: %s %s's new template was still refused %s after the slots of %d stalled rollouts lapsed (stalledSlotLifetime %s)",
				y.kind, y.ref(), w.now.Sub(from), len(stalled), *lifetime)
			return true
		}
		w.advance(mRetry)
	}
}

// admissionBound is when a new template of x, wanted from on, must be admitted: minInterval
// after its last start, and the group's last eviction counting in flight for
// EvictionLapse+MaxClockSkew (even once its pod is replaced) or within the cooldown (+ the
// skew), then the leader's and a cache's lag and a retry, and the time a window holds.
func (w *fworld) admissionBound(x *fwl, from time.Time) time.Time {
	if w.cfg.minInterval {
		from = maxTime(from, x.lastStart.Add(mMinInterval))
	}
	if w.cfg.shared && !x.guardAdmitted.IsZero() {
		// Every eviction the guard admitted counts in flight until it lapses, kube's PDB
		// check notwithstanding; the cooldown runs from the last one that took effect, or
		// one kube refused whose pod is gone or terminating since (or has not lapsed when
		// the operator starts asking): holdfast can no longer tell it from one that did.
		from = maxTime(from, x.guardAdmitted.Add(budget.EvictionLapse+budget.MaxClockSkew))
		var last time.Time
		if n := len(x.evictions); n > 0 {
			last = x.evictions[n-1]
		}
		for _, r := range x.refused {
			if !slices.Contains(x.pods, r.p) || r.p.Terminating || from.Sub(r.at) < budget.EvictionLapse+budget.MaxClockSkew {
				last = maxTime(last, r.at)
			}
		}
		if !last.IsZero() {
			from = maxTime(from, last.Add(w.cfg.cooldown+budget.MaxClockSkew))
		}
	}
	bound := from.Add(2*mMaxLag + 2*mRetry + max(w.cfg.skew, -w.cfg.skew))
	if _, wait := windowHolds(w.cfg.window, from); wait > 0 {
		bound = bound.Add(wait) // a window holds new rollouts for at most this long
	}
	return bound
}

func maxTime(t time.Time, more ...time.Time) time.Time {
	for _, m := range more {
		if m.After(t) {
			t = m
		}
	}
	return t
}

// generatedFleet runs fleet sequence seed: 6–15 operations, then the scripted operator.
func generatedFleet(seed uint64, broken func(Input) (Decision, error), counts map[string]int) *fworld {
	return generateFleet(seed, broken, counts, true)
}

// generatedBefore is sequence seed as generated before the namespace walks: the
// regressions and replays found then, which replay the sequences that caught them.
func generatedBefore(seed uint64, broken func(Input) (Decision, error)) *fworld {
	return generateFleet(seed, broken, nil, false)
}

func generateFleet(seed uint64, broken func(Input) (Decision, error), counts map[string]int, namespaceWalks bool) *fworld {
	gen := rand.New(rand.NewPCG(seed, 0xf1))
	ops := make([]fop, 6+gen.IntN(10))
	for k := range ops {
		ops[k] = fop{Kind: fopKinds[gen.IntN(len(fopKinds))], W: gen.IntN(5), N: gen.IntN(1000), Repl: gen.IntN(2)}
	}
	// The re-creates and flag-following scales are drawn from a stream of their own too
	// (two in 23 between the operations), and so is which workloads run the
	// konnectivity-server container whose --server-count follows their replicas: half of
	// the Deployments and StatefulSets no generated "scale" names (whose scale, leaving the
	// flag behind, argsMatchReplicas would refuse), so that every seed's operations do
	// what they did.
	more := rand.New(rand.NewPCG(seed, 0x5ca1e))
	cfg := fleetConfig(seed)
	flagged := make([]bool, len(cfg.kinds))
	for k := range flagged {
		scaled := slices.ContainsFunc(ops, func(op fop) bool { return op.Kind == "scale" && op.W%len(cfg.kinds) == k })
		flagged[k] = more.IntN(2) == 0 && !scaled
	}
	w := newFlaggedFleet(seed, broken, flagged)
	// The relabel walks are drawn from a stream of their own, between the operations above
	// (two in 23, as often as an edit), so that every seed's operations stay those the
	// replays and docs name.
	walks := rand.New(rand.NewPCG(seed, 0x7e1a))
	// The namespace walks too (one in 23).
	nsWalks := rand.New(rand.NewPCG(seed, 0x45a1))
	for _, op := range ops {
		if more.IntN(len(fopKinds)) < 2 {
			extra := fop{Kind: fmoreKinds[more.IntN(len(fmoreKinds))], W: more.IntN(5), N: more.IntN(1000), Repl: more.IntN(2)}
			if counts != nil {
				counts[extra.Kind]++
			}
			w.step(extra)
		}
		if walks.IntN(len(fopKinds)) < 2 {
			walk := fop{Kind: "relabel", W: walks.IntN(5), N: walks.IntN(1000), Repl: walks.IntN(2)}
			if counts != nil {
				counts[walk.Kind]++
			}
			w.step(walk)
		}
		if namespaceWalks && nsWalks.IntN(len(fopKinds)) < 1 {
			walk := fop{Kind: "nsRelabel", W: nsWalks.IntN(5), N: nsWalks.IntN(1000), Repl: nsWalks.IntN(2)}
			if counts != nil {
				counts[walk.Kind]++
			}
			w.step(walk)
		}
		if counts != nil {
			counts[op.Kind]++
		}
		w.step(op)
	}
	w.operate()
	return w
}

func replayFleet(seed uint64, ops []fop) *fworld {
	w := newFleet(seed, nil)
	for _, op := range ops {
		w.step(op)
	}
	w.operate()
	return w
}

func (w *fworld) replayCase() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{seed: %d, ops: []fop{\n", w.seed)
	for _, op := range w.ops {
		b.WriteString("\t" + op.String() + "\n")
	}
	b.WriteString("}},\n")
	return b.String()
}

type fleetResult struct {
	sequences, steps, violations, deadlocks, maxSeen int
	relabels                                         relabelCounts
	recreates                                        recreateCounts
	counts, checked, gaps                            map[string]int
	failed                                           []uint64 // the sequences that broke an outcome
	first                                            *fworld
}

func exploreFleet(n int, broken func(Input) (Decision, error)) fleetResult {
	logf.SetLogger(logr.Discard())
	res := fleetResult{counts: map[string]int{}, checked: map[string]int{}, gaps: map[string]int{}}
	for seed := uint64(*fleetModelFrom); seed < uint64(*fleetModelFrom+n); seed++ {
		w := generatedFleet(seed, broken, res.counts)
		res.sequences++
		res.steps += len(w.ops)
		res.maxSeen = max(res.maxSeen, w.maxSeen)
		r := &res.relabels
		r.left += w.relabels.left
		r.outByOperator += w.relabels.outByOperator
		r.entered += w.relabels.entered
		r.changed += w.relabels.changed
		r.exempt += w.relabels.exempt
		r.withEdit += w.relabels.withEdit
		r.refused += w.relabels.refused
		r.refusals += w.relabels.refusals
		r.nsLeft += w.relabels.nsLeft
		r.nsEntered += w.relabels.nsEntered
		r.nsWorkloads += w.relabels.nsWorkloads
		r.nsChanged += w.relabels.nsChanged
		r.nsRefused += w.relabels.nsRefused
		r.nsExempt += w.relabels.nsExempt
		res.recreates.add(w.recreates)
		for k, v := range w.checked {
			res.checked[k] += v
		}
		for k, v := range w.gaps {
			res.gaps[k] += v
		}
		if len(w.violations) > 0 {
			res.violations += len(w.violations)
			res.failed = append(res.failed, seed)
			if res.first == nil {
				res.first = w
			}
		}
		if w.deadlock {
			res.deadlocks++
		}
	}
	return res
}

// fleetCaught is the first of n fleet sequences whose outcome the mutant breaks, or -1.
func fleetCaught(n int, mutant func(Input) (Decision, error)) (int, string) {
	for seed := range uint64(n) {
		if w := generatedFleet(seed, mutant, nil); len(w.violations) > 0 {
			return int(seed), w.violations[0]
		}
	}
	return -1, ""
}

func TestRolloutFleetModel(t *testing.T) {
	res := exploreFleet(*fleetModelSequences, nil)
	gaps := "none"
	if len(res.gaps) > 0 {
		var named []string
		for _, k := range slices.Sorted(maps.Keys(res.gaps)) {
			named = append(named, fmt.Sprintf("%s:%d", k, res.gaps[k]))
		}
		gaps = strings.Join(named, ",")
	}
	fmt.Printf("RELIABILITY rollout-fleet-model sequences=%d steps=%d invariantViolations=%d deadlocks=%d knownGaps=%s\n",
		res.sequences, res.steps, res.violations, res.deadlocks, gaps)
	var checked, shares []string
	for _, k := range slices.Sorted(maps.Keys(res.checked)) {
		checked = append(checked, fmt.Sprintf("%s=%d", k, res.checked[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(res.counts)) {
		shares = append(shares, fmt.Sprintf("%s=%d", k, res.counts[k]))
		if float64(res.counts[k]) < 0.01*float64(res.steps) {
			t.Errorf("operation %s is %d of %d steps, under 1%%", k, res.counts[k], res.steps)
		}
	}
	fmt.Printf("RELIABILITY rollout-fleet-model-checked %s maxInFlightSeen=%d\n", strings.Join(checked, " "), res.maxSeen)
	fmt.Printf("RELIABILITY rollout-fleet-model-operations %s\n", strings.Join(shares, " "))
	r := res.relabels
	fmt.Printf("RELIABILITY rollout-fleet-model-relabel left=%d entered=%d refused=%d refusals=%d changed=%d withEdit=%d exempt=%d outByOperator=%d\n",
		r.left, r.entered, r.refused, r.refusals, r.changed, r.withEdit, r.exempt, r.outByOperator)
	if r.entered < 10 || r.refused < 10 || r.changed < 10 {
		t.Errorf("the relabel walks entered %d workloads (%d with another template), %d refused first, want at least 10 each", r.entered, r.changed, r.refused)
	}
	fmt.Printf("RELIABILITY rollout-fleet-model-namespaces left=%d entered=%d workloads=%d changed=%d refused=%d exempt=%d\n",
		r.nsLeft, r.nsEntered, r.nsWorkloads, r.nsChanged, r.nsRefused, r.nsExempt)
	if r.nsEntered < 10 || r.nsRefused < 10 || r.nsChanged < 10 {
		t.Errorf("the namespace walks entered %d namespaces (%d workloads with another template), %d refused first, want at least 10 each",
			r.nsEntered, r.nsChanged, r.nsRefused)
	}
	rc := res.recreates
	fmt.Printf("RELIABILITY rollout-fleet-model-recreate recreates=%d orphan=%d cascade=%d newTemplate=%d admitted=%d refused=%d refusals=%d exempt=%d counted=%d "+
		"flagScales=%d flagAdmitted=%d flagRefused=%d flagRolling=%d\n",
		rc.orphan+rc.cascade, rc.orphan, rc.cascade, rc.newTemplate, rc.admitted, rc.refused, rc.refusals, rc.exempt, rc.counted,
		rc.flagScales, rc.flagAdmitted, rc.flagRefused, rc.flagRolling)
	if rc.counted < 10 || rc.refused < 10 || rc.flagAdmitted < 10 || rc.flagRefused < 10 {
		t.Errorf("the re-creates were counted as starts %d times and refused first %d times, the flag-following scales admitted %d and refused %d, want at least 10 each",
			rc.counted, rc.refused, rc.flagAdmitted, rc.flagRefused)
	}
	for _, inv := range []string{"F1", "F1namespace", "F1released", "F1scale", "F2", "F2start", "F3", "L1", "L2"} {
		if res.checked[inv] < 10 {
			t.Errorf("invariant %s judged %d outcomes, want at least 10", inv, res.checked[inv])
		}
	}
	if res.first != nil {
		t.Errorf("%d invariant violations, %d deadlocks in sequences %v; the first sequence's:\n%s\nreplay it (TestRolloutFleetModelReplays):\n%s",
			res.violations, res.deadlocks, res.failed, strings.Join(res.first.violations, "\n"), res.first.replayCase())
	}
}

// fleetReplays are fleet sequences that caught a mutant of the mutation test (Decide
// without the check named): the full guard must hold their outcomes, the mutant must not.
// The relabel walks changed what seeds 1 and 23 (concurrency, sharedBudget) do: 9 and 5
// are now the first sequences that catch those mutants; the re-creates and flag-following
// scales changed what seed 12 (maxInFlightPerNamespace) does: 357 is now the first.
var fleetReplays = []struct {
	seed  uint64
	check string
}{
	{seed: 9, check: RuleConcurrency},
	{seed: 5, check: budget.RuleSharedBudget},
	{seed: 357, check: checkPerNamespace},
}

// fleetEntryReplay is a sequence of the relabel walks in which, were checkEntering not to
// refuse an entry over an unfinished rollout, the operator's entry of a DaemonSet whose
// template changed outside the selection a moment before would put it rolling beside a
// StatefulSet under maxInFlight 1 (F1 counts an entry from when it is admitted, enter).
const fleetEntryReplay = 13

// withoutEntering is Decide with checkEntering's refusal of an entry over an unfinished
// rollout or two templates with live pods dropped (the relabel out is refused as ever).
func withoutEntering(in Input) (Decision, error) {
	d, err := Decide(in)
	d.Violations = slices.DeleteFunc(d.Violations, func(v decision.Violation) bool {
		return v.Rule == RuleSelection && strings.Contains(v.Message, "brings the workload into the policy's selection while")
	})
	return d, err
}

// fleetScaleReplay is a sequence of the flag-following scales in which, were
// checkScaleDuringRollout not to refuse a scale towards a template without pods during an
// unfinished rollout, a StatefulSet rolling from tag 1 to tag 5 would get pods of tag 5 at
// a new --server-count beside both (F3).
const fleetScaleReplay = 67

// fleetCreateReplay is a sequence of the re-creates in which, were a CREATE that adopts
// pods of another template (or starts a new one over them) not a start the fleet limit
// holds and records (withoutCreateStarts), two workloads would roll out at once under a
// limit of one (F1).
const fleetCreateReplay = 251

// withoutCreateStarts is Decide with a CREATE never a start: neither held by the fleet
// limit or the shared budget nor recorded in their ledgers.
func withoutCreateStarts(in Input) (Decision, error) {
	d, err := Decide(in)
	if in.Operation == admissionv1.Create {
		d.Starts = false
		d.Violations = slices.DeleteFunc(d.Violations, func(v decision.Violation) bool {
			return v.Rule == RuleConcurrency || v.Rule == budget.RuleSharedBudget
		})
	}
	return d, err
}

// fleetRegressions are fleet sequences that once broke an outcome (the 50,000-sequence
// run's, and 2,000-sequence runs' on the way to fixing them), each fixed:
//   - 3277: a start replaced by a later spec before it got pods held its slot until it
//     lapsed (InFlight reads the journal's generation, budget.Start.Generation);
//   - 22213 and 1110: a partition lowered under a rollout finished under it held no slot
//     (budget.Start.Lowered; Observe reopens the rollout); 975: a scale up was read as a
//     lowered partition (lowersPartition);
//   - 21630: the model derived a ReplicaSet from pods with one being evicted, smaller than
//     the Deployment, and never rolled it (kubemodel deriveSets);
//   - 14820, 21640: the model restarted the stall clock on a partition lowered under a
//     rollout that could roll, and on a hold lifted at once (the clock stops while held);
//   - 17079: the model read a scale up of an OnDelete StatefulSet whose template has pods
//     as a start; 21916: a lowered partition over pods all on the template, one evicted,
//     as a start.
//   - 46710: kube's own stuck Deployment (kubemodel.Workload.StaleScale), which the
//     operator unsticks with a scale up and back (the known gap kubeStaleDesiredReplicas);
//   - 8237, 20509: the model read a canary at rest under its partition as rolling again
//     once a pod of it was evicted (kube replaces it on its revision).
//   - 8973, 20683, 21220, 42587, 42927 (the next run): with the model's stall clock stopped
//     while held, L2 bounded the stalled slot's lapse from it, where holdfast restarts the
//     clock at a lift it saw, later; L2 now takes the later of the two.
//   - 19, 155 (with kube's PDB check and a one-minute cooldown): an eviction holdfast
//     admitted and kube refused held the group's rollouts for the whole cooldown
//     (budget.Evictions.LastEffective).
//   - 2946, 3656, 6801 (the relabel walks, outside the 2,000 sequences make test runs): a
//     workload relabelled back into the selection before the leader recorded it again has
//     a retired journal, which journal.View sets aside for the history; FromHistory dates
//     the current revision's progress at its creation, and an evicted pod made the old
//     object's status InProgress, so the long-finished revision read as stalled and the
//     next edit passed as the fix of a stalled rollout: past the shared budget's cooldown
//     (F2, 2946, 6801), the fleet limit (F1, 3656) and a Deny window (2946). A timeline
//     no journal records whose pods all run the current template is no stall now
//     (Timeline.Unjournaled).
//   - 1715, 1843 (the re-creates): a StatefulSet re-created with the template it had over
//     its unfinished rollout is a start the ledger records, yet InFlight dropped it while
//     the journal of the name was the deleted workload's (which Rolling does not count):
//     an edit of another workload admitted before the leader recorded the new object
//     rolled out beside it, past the limit. InFlight now counts the start unless a live
//     journal of the name shows it.
//   - 1461, 77 (the re-creates; once the known gap recreateForgetsEvictions): a group's
//     eviction ledger was named by its workload's UID, so a workload created again over the
//     pods an orphaning delete left read a new, empty ledger, and its next start passed
//     within the cooldown of an eviction admitted just before the delete. Its ledger is
//     found by kind, namespace and name now (budget.GroupID); the explorer counts the
//     evictions across a cascading re-create too, as holdfast does (77 held the edit for
//     the cooldown, which the explorer's bound then left out).
//   - 142: an eviction admitted right after the CREATE, while the eviction guard's cache
//     still showed the pods orphaned and no workload over them, was recorded in no group;
//     the group of an orphan is the workload kube adopts it into, asked of the API server
//     when the cache shows none (workload.GroupOf).
//   - 358: a StatefulSet deleted while OnDelete and created again without it, over pods of
//     another template, lifted the hold as a resume does, but a CREATE was never judged so
//     under the shared budget (a start within its cooldown); it is now (the journal's
//     Held, Timeline.Held, and decide's resumes), and the shared budget judges a CREATE that
//     starts (sharedPolicies).
//   - 2628, 3343, 3781, 5002, 5240 (a run of sequences 2,000 to 8,000): an exempt requester's
//     edit admitted, then an orphaning delete before kube made a pod of it, and the
//     operator's CREATE with that template: holdfast admits it as that rollout going on
//     (revisionsOf), and the explorer counted it as the operator's start, past the limit
//     (F1) or the shared cooldown (F2). The explorer's: the CREATE carries that start's
//     excuse (started).
//   - 4119, 6308, 7815 (the same run): a start recorded for a workload deleted and created
//     again, whose new object then changed its template (outside the selection and back in)
//     held a fleet slot until the start lapsed, as no journal of its UID would show it
//     replaced (L1): InFlight drops it once the live journal of the name has made another
//     template current after it.
var fleetRegressions = []uint64{3277, 22213, 1110, 975, 21630, 14820, 21640, 17079, 21916, 46710, 8237, 20509,
	8973, 20683, 21220, 42587, 42927, 19, 155, 2946, 3656, 6801, 1715, 1843, 1461, 77, 142, 358,
	2628, 3343, 3781, 5002, 5240, 4119, 6308, 7815}

// fleetNamespaceRegressions are sequences of the namespace walks that once broke an
// outcome: seeds 9, 42, 92, 107, 164 and 181 put two workloads rolling under maxInFlight 1
// where the policy selects namespaces by label, as the store the model's caches (and
// holdfast simulate) read through listed no namespace's metadata, and every workload read
// as unselected.
var fleetNamespaceRegressions = []uint64{9, 42, 92, 107, 164, 181}

// fleetFuzzRegressions are the sequences make fuzz's 50,000 found breaking an outcome:
//   - 8846, 11526, 17604, 22269, 32816, 39095 (F2): the model named a StatefulSet's pods
//     like a Deployment's, not by ordinal, so the StatefulSet created again over them
//     adopted them in the model and not in holdfast (kube adopts only its own ordinals,
//     isMemberOf), and their evictions counted in no group. The model names them
//     <set>-<ordinal> now (podName), as kube does.
//   - 28226 (F2): a StatefulSet created again with the template whose rollout its deleted
//     workload had under way continues it, and its start is recorded; until the leader
//     observed the new object, the journal of the name was the deleted workload's, with
//     that template current, and the eviction guard read the start as the journal's to
//     decide, which held nothing (Rolling: deleted). The journal decides once it has
//     observed the start's object (budget.RolloutStart.ObservedBy);
//     TestSharedStartHoldsUntilTheJournalObservesItsObject.
//   - 37127 (F2): an eviction judged on a cache that still showed a StatefulSet's pod
//     Ready, replaced a moment before by one not Ready yet, took the group's second pod
//     down under a budget of one. An eviction the cache's pods would admit is judged again
//     on the pods read from the API server (Handler.confirmLive);
//     TestAdmittedEvictionCountsThePodsAsTheAPIServerHasThem.
//   - 27027, 41482, 41596 (L1): a start recorded for a workload later scaled with its
//     argsMatchReplicas flag (a new fingerprint, the same revision) held a fleet slot
//     until it lapsed, as the journal showed no revision of its fingerprint. A start keeps
//     its shape, which the journal's revision shows (budget.Start.Shape);
//     TestStartScaledSinceIsShownByItsShape.
//   - 6279 (L1): a start recorded for a DaemonSet that was then relabelled out, set back
//     to its previous template outside, relabelled in, deleted with its pods and created
//     again on that template: the new object's journal dated that template before the
//     start, so the start held the fleet's slot for its whole lapse, 2 minutes. It counts
//     no more once the leader has seen the object created in its place settle
//     (journal.Observed.Replaced); not as soon as it has seen that object, which let a CREATE
//     the leader had not seen yet roll out beside another workload (seed 585, in make
//     test's range); TestStartOfAnObjectReplacedSinceCountsNoMore.
//   - 22500 (L1): a StatefulSet's partition lowered (a start), then the StatefulSet deleted
//     with its pods and created again on the lowered template: the start read as a
//     resumed rollout the journal had not seen lowered, which it never will of a deleted
//     object, and held the slot until it lapsed. Once the object created in its place has
//     settled, a start of the replaced object counts no more, whatever its template.
var fleetFuzzRegressions = []uint64{8846, 11526, 17604, 22269, 32816, 39095, 28226, 37127, 27027, 41482, 41596, 6279, 22500}

var fleetReplaySeed = flag.Int("rollout-fleet-model.seed", -1, "run only this fleet sequence (with -rollout-fleet-model.trace)")

func TestRolloutFleetModelReplays(t *testing.T) {
	logf.SetLogger(logr.Discard())
	if *fleetReplaySeed >= 0 {
		w := generatedFleet(uint64(*fleetReplaySeed), nil, nil)
		if len(w.violations) > 0 {
			t.Errorf("seed %d: %s", *fleetReplaySeed, strings.Join(w.violations, "\n"))
		}
		if len(w.gaps) > 0 {
			t.Logf("seed %d met the known gaps %v", *fleetReplaySeed, w.gaps)
		}
		return
	}
	for _, seed := range fleetRegressions {
		if w := generatedBefore(seed, nil); len(w.violations) > 0 || w.deadlock {
			t.Errorf("seed %d: %s", seed, strings.Join(w.violations, "\n"))
		}
	}
	for _, seed := range slices.Concat(fleetNamespaceRegressions, fleetFuzzRegressions) {
		if w := generatedFleet(seed, nil, nil); len(w.violations) > 0 || w.deadlock {
			t.Errorf("seed %d: %s", seed, strings.Join(w.violations, "\n"))
		}
	}
	for _, c := range fleetReplays {
		if w := generatedBefore(c.seed, nil); len(w.violations) > 0 {
			t.Errorf("seed %d: %s", c.seed, strings.Join(w.violations, "\n"))
		}
		mutant := func(in Input) (Decision, error) {
			return decideWithout(in, func(check string) bool { return check == c.check })
		}
		if w := generatedBefore(c.seed, mutant); len(w.violations) == 0 {
			t.Errorf("seed %d without %s broke no outcome", c.seed, c.check)
		}
	}
	if w := generatedBefore(fleetEntryReplay, nil); len(w.violations) > 0 {
		t.Errorf("seed %d: %s", fleetEntryReplay, strings.Join(w.violations, "\n"))
	}
	if w := generatedBefore(fleetEntryReplay, withoutEntering); !slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, "F1: ") }) {
		t.Errorf("seed %d with unfinished entries admitted broke no F1: %v", fleetEntryReplay, w.violations)
	}
	for _, c := range []struct {
		seed      uint64
		without   string
		mutant    func(Input) (Decision, error)
		invariant string
	}{
		{fleetScaleReplay, checkScale, func(in Input) (Decision, error) {
			return decideWithout(in, func(check string) bool { return check == checkScale })
		}, "F3: "},
		{fleetCreateReplay, "a CREATE's start", withoutCreateStarts, "F1: "},
	} {
		if w := generatedBefore(c.seed, nil); len(w.violations) > 0 {
			t.Errorf("seed %d: %s", c.seed, strings.Join(w.violations, "\n"))
		}
		if w := generatedBefore(c.seed, c.mutant); !slices.ContainsFunc(w.violations, func(v string) bool { return strings.Contains(v, c.invariant) }) {
			t.Errorf("seed %d without %s broke no %s%v", c.seed, c.without, c.invariant, w.violations)
		}
	}
}

// TestFleetLimitResolver holds the explorer's own resolver to the documented rounding and
// cap, and Limit to it.
func TestFleetLimitResolver(t *testing.T) {
	for _, c := range []struct {
		v                  intstr.IntOrString
		selected, limitCap int
		want               int
	}{
		{intstr.FromInt32(2), 5, 0, 2}, {intstr.FromString("30%"), 9, 0, 3}, {intstr.FromString("34%"), 5, 0, 2},
		{intstr.FromString("25%"), 2, 0, 1}, {intstr.FromString("1%"), 3, 0, 1}, {intstr.FromString("60%"), 4, 0, 3},
		{intstr.FromString("60%"), 4, 2, 2}, {intstr.FromString("25%"), 2, 2, 1}, {intstr.FromInt32(3), 9, 1, 3},
	} {
		if got := fleetLimit(c.v, c.selected, c.limitCap); got != c.want {
			t.Errorf("fleetLimit(%s, %d, cap %d) = %d, want %d", c.v.String(), c.selected, c.limitCap, got, c.want)
		}
		r := &v1alpha1.ConcurrencyRule{MaxInFlight: c.v}
		if c.limitCap > 0 {
			r.MaxInFlightCap = ptr.To(int32(c.limitCap))
		}
		if got := Limit(r, c.selected); got != c.want {
			t.Errorf("Limit(%s, %d, cap %d) = %d, the documented rounding gives %d", c.v.String(), c.selected, c.limitCap, got, c.want)
		}
	}
}

// fleetChecks are the checks of Decide the mutation test hands to the fleet explorer: the
// single explorer models one workload and no evictions, which no fleet limit or shared
// budget binds.
var fleetChecks = map[string]bool{RuleConcurrency: true, checkCap: true, checkPerNamespace: true, checkSlotLifetime: true, budget.RuleSharedBudget: true}

// racingClient is the API server's store of Leases with a hook: onRead runs once, after the
// next Lease is read and before the reader goes on, so that another request is decided and
// recorded in between (the eviction explorer's ledgerStore.onRead).
type racingClient struct {
	client.Client
	onRead func()
}

// List races as Get does: a group's ledger is read by a List (budget.Ledgers.ReadGroup).
func (c *racingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Client.List(ctx, list, opts...)
	if _, ok := list.(*coordinationv1.LeaseList); ok && c.onRead != nil {
		f := c.onRead
		c.onRead = nil
		f()
	}
	return err
}

func (c *racingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*coordinationv1.Lease); ok && c.onRead != nil {
		f := c.onRead
		c.onRead = nil
		f()
	}
	return err
}
