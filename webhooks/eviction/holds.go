package eviction

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// HoldBreak is how long after a pod's last deferred eviction a new one starts a new hold:
// drain tools retry every few seconds, so a minute without one means the drain stopped.
const HoldBreak = time.Minute

// Holds tracks, per pod, since when this replica has deferred its evictions without a
// break (maxHold). Each replica sees the retries it answers; a drain whose retries are
// spread over replicas is warned about by each once its own view passes maxHold.
type Holds struct {
	mu   sync.Mutex
	pods map[types.UID]hold
}

type hold struct{ since, last time.Time }

// Deferred records a deferral of the pod's eviction at now and returns how long the pod
// has been held.
func (h *Holds) Deferred(pod types.UID, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pods == nil {
		h.pods = map[types.UID]hold{}
	}
	for uid, p := range h.pods {
		if now.Sub(p.last) > HoldBreak {
			delete(h.pods, uid)
		}
	}
	p, ok := h.pods[pod]
	if !ok {
		p.since = now
	}
	p.last = now
	h.pods[pod] = p
	return now.Sub(p.since)
}

// Ended forgets the pod's hold (its eviction was admitted) and returns how long it lasted.
func (h *Holds) Ended(pod types.UID, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pods[pod]
	delete(h.pods, pod)
	return now.Sub(p.since), ok
}

// maxHold is the shortest maxHold of the policies that deferred the eviction, zero when
// none has one.
func maxHold(d Decision, policies []v1alpha1.DisruptionPolicy) (time.Duration, string) {
	var least time.Duration
	var name string
	for _, v := range d.Violations {
		for i := range policies {
			p := &policies[i]
			if p.Name == v.Policy && p.Spec.MaxHold != nil && (least == 0 || p.Spec.MaxHold.Duration < least) {
				least, name = p.Spec.MaxHold.Duration, p.Name
			}
		}
	}
	return least, name
}

// nodeOf is the node an Event about a held pod is also recorded on.
func nodeOf(pod *corev1.Pod) *corev1.Node {
	if pod.Spec.NodeName == "" {
		return nil
	}
	return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName, UID: types.UID(pod.Spec.NodeName)}}
}
