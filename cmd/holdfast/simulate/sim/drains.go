package sim

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
)

// drainRun is one Drain step in progress.
type drainRun struct {
	spec    *scenariov1alpha1.Drain
	start   time.Time
	nodes   map[string]*nodeDrain
	tries   []*evictTry
	figures *DrainFigures
}

type nodeDrain struct {
	done   bool
	failed bool
}

// evictTry is the drain tool's eviction of one pod.
type evictTry struct {
	w        *simWorkload
	p        *pod
	node     string
	next     time.Time
	silent   int // client-go's silent retries of this call so far
	evicted  bool
	done     bool
	deferred int
	// heldSince is the first deferral of the eviction, for the drainer's deadline.
	heldSince time.Time
}

func (s *sim) startDrain(d *scenariov1alpha1.Drain) {
	s.cordon(d.Nodes, true)
	run := &drainRun{spec: d, start: s.now, nodes: map[string]*nodeDrain{},
		figures: &DrainFigures{Nodes: strings.Join(d.Nodes, ","), Requested: len(d.Nodes)}}
	for _, name := range d.Nodes {
		run.nodes[name] = &nodeDrain{}
		for _, w := range s.workloads {
			if w.ref.Kind == v1alpha1.KindDaemonSet && !d.DaemonSets {
				continue
			}
			for _, p := range w.k.Pods {
				if obj := w.objects[p]; obj != nil && obj.Spec.NodeName == name && !p.Terminating {
					run.tries = append(run.tries, &evictTry{w: w, p: p, node: name, next: s.now})
				}
			}
		}
	}
	order := map[string]int{}
	for i, name := range d.Nodes {
		order[name] = i
	}
	sort.SliceStable(run.tries, func(i, j int) bool { return order[run.tries[i].node] < order[run.tries[j].node] })
	s.drains = append(s.drains, run)
	s.res.Drains = append(s.res.Drains, run.figures)
}

// drainStep sends the evictions due and ends the node drains whose pods are gone.
func (s *sim) drainStep(d *drainRun) {
	retry := durationOr(d.spec.RetryAfter, scenariov1alpha1.DefaultRetryAfter)
	clientRetries := scenariov1alpha1.DefaultClientRetries
	if d.spec.ClientRetries != nil {
		clientRetries = *d.spec.ClientRetries
	}
	user := d.spec.User
	if user == "" {
		user = scenariov1alpha1.DefaultDrainUser
	}
	current := ""
	if d.spec.Sequential {
		for _, name := range d.spec.Nodes {
			if nd := d.nodes[name]; !nd.done && !nd.failed {
				current = name
				break
			}
		}
	}
	for _, t := range d.tries {
		if t.done || t.evicted || s.now.Before(t.next) || (current != "" && t.node != current) {
			continue
		}
		obj := t.w.objects[t.p]
		if obj == nil || t.p.Terminating {
			t.evicted = true // gone meanwhile
			continue
		}
		if f := d.spec.ForceAfter; f != nil && t.deferred > 0 && !s.now.Before(t.heldSince.Add(f.Duration)) {
			// The drainer's deadline: it deletes the pod, and no budget holds a delete by it.
			d.figures.Forced++
			t.evicted = true
			s.log(Entry{Request: "DELETE", Object: fmt.Sprintf("Pod %s/%s (%s on %s)", obj.Namespace, obj.Name, t.w.ref.Name, t.node), By: user,
				Answer: "forced", Message: fmt.Sprintf("the drainer's deadline (%s after the first of %d deferrals)", f.Duration, t.deferred)})
			s.goes(t, obj)
			continue
		}
		request, send := "EVICT", s.evict
		if d.spec.DisableEviction {
			request, send = "DELETE", s.deletePod
		}
		resp := send(obj, authenticationv1.UserInfo{Username: user, Groups: d.spec.Groups})
		e := Entry{Request: request, Object: fmt.Sprintf("Pod %s/%s (%s on %s)", obj.Namespace, obj.Name, t.w.ref.Name, t.node), By: user, Answer: "allowed"}
		if resp.Allowed && d.spec.DisableEviction {
			s.res.Requests.DeletesAllowed++
			d.figures.Deletes++
			t.evicted = true
			s.log(e)
			s.goes(t, obj)
			continue
		}
		if resp.Allowed {
			s.res.Requests.EvictionsAllowed++
			d.figures.Evictions++
			t.evicted = true
			if t.deferred > 0 {
				e.Message = fmt.Sprintf("after %d deferrals", t.deferred)
			}
			if resp.AuditAnnotations[eviction.RuleMaxHold] != "" {
				e.Answer = "released"
				s.res.Requests.EvictionsReleased++
				d.figures.Released++
			}
			s.log(e)
			s.goes(t, obj)
			continue
		}
		e.Answer, e.Message = answer(resp)
		code := int32(0)
		if resp.Result != nil {
			code = resp.Result.Code
		}
		if d.spec.DisableEviction {
			// kubectl drain --disable-eviction gives up at the first refused DELETE.
			s.res.Requests.DeletesRefused++
			d.figures.Refused++
			t.done = true
			d.nodes[t.node].failed = true
			s.log(e)
			continue
		}
		if code != http.StatusTooManyRequests {
			// kubectl drain gives up on anything but a 429.
			s.res.Requests.EvictionsRefused++
			d.figures.Refused++
			t.done = true
			d.nodes[t.node].failed = true
			s.log(e)
			continue
		}
		s.res.Requests.EvictionsDeferred++
		d.figures.Deferred++
		if t.deferred == 0 {
			s.log(e) // the first of a streak; the allowed entry counts the rest
			t.heldSince = s.now
		}
		t.deferred++
		wait := retry
		if ra := retryAfter(resp); ra > 0 && t.silent < clientRetries {
			wait, t.silent = ra, t.silent+1
		} else {
			t.silent = 0
		}
		t.next = s.now.Add(wait)
	}
	finished := false
	for _, name := range d.spec.Nodes {
		nd := d.nodes[name]
		if nd.done || nd.failed {
			continue
		}
		empty := true
		for _, t := range d.tries {
			if t.node == name && !t.done && (!t.evicted || t.w.objects[t.p] != nil) {
				empty = false
			}
		}
		if empty {
			nd.done = true
			d.figures.Drained++
			d.figures.Seconds = math.Round(s.now.Sub(d.start).Seconds()*10) / 10
			s.log(Entry{Request: "drain", Object: name, Answer: "done"})
			finished = true
		}
	}
	if finished && d.spec.Sequential {
		s.drainStep(d) // the next node begins now
	}
}

// goes takes the pod down: an eviction admitted, or the drainer's forced delete.
func (s *sim) goes(t *evictTry, obj *corev1.Pod) {
	t.p.Terminating = true
	obj.DeletionTimestamp = ptr.To(metav1.NewTime(s.now))
	s.store.Put(obj)
	t.w.evictedAt = append(t.w.evictedAt, s.now)
	if n := s.nodeByNam[t.node]; n != nil {
		t.w.disruptions = append(t.w.disruptions, disruption{labels: n.obj.Labels, at: s.now})
	}
	t.w.dirty = true
}
