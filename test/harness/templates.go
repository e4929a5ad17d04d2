package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TemplatesResult is what a TemplateWatch saw.
type TemplatesResult struct {
	// MaxLive is the most templates seen with live pods at once, and Worst those
	// templates, with their live pods' names, at the first moment it was reached.
	MaxLive int
	Worst   map[string][]string
	// Templates is every template seen with a live pod.
	Templates []string
	// Err is why the watch ended before it was stopped, if it did.
	Err error
}

// TemplateWatch follows the pods of a namespace through a watch, every event in the API
// server's order, and counts the pod templates with live pods: a template is kube's
// identity of a pod's template (the pod-template-hash or controller-revision-hash label),
// and a pod is live until it is terminal or gone (a Terminating pod counts).
type TemplateWatch struct {
	follow *podFollower
	state  *templateState
}

// WatchTemplates lists the pods in ns matching selector and follows their changes,
// reading each pod's template from its label hashLabel.
func WatchTemplates(ctx context.Context, cs kubernetes.Interface, ns, selector, hashLabel string) (*TemplateWatch, error) {
	s := &templateState{hashLabel: hashLabel, live: map[types.UID]*corev1.Pod{}, seen: map[string]bool{}}
	f, err := followPods(ctx, cs, ns, selector, func(pods []corev1.Pod) {
		for i := range pods {
			s.apply(watch.Added, &pods[i])
		}
	}, s.apply)
	if err != nil {
		return nil, err
	}
	return &TemplateWatch{follow: f, state: s}, nil
}

// Stop ends the watch and returns what it saw.
func (w *TemplateWatch) Stop() TemplatesResult {
	res := w.state.res
	res.Err = w.follow.stop()
	res.Templates = slices.Sorted(maps.Keys(w.state.seen))
	return res
}

type templateState struct {
	hashLabel string
	live      map[types.UID]*corev1.Pod
	seen      map[string]bool
	res       TemplatesResult
}

func (s *templateState) apply(t watch.EventType, p *corev1.Pod) {
	if t == watch.Deleted || workload.PodEnded(p) {
		delete(s.live, p.UID)
	} else {
		s.live[p.UID] = p
	}
	by := map[string][]string{}
	for _, q := range s.live {
		h := q.Labels[s.hashLabel]
		by[h] = append(by[h], q.Name)
		s.seen[h] = true
	}
	if len(by) > s.res.MaxLive {
		s.res.MaxLive = len(by)
		for _, names := range by {
			slices.Sort(names)
		}
		s.res.Worst = by
	}
}

// podFollower hands the pods of a namespace to its callbacks, one goroutine, in the API
// server's order: the listed pods, then every watch event, through a watch that resumes
// where it broke.
type podFollower struct {
	cancel context.CancelFunc
	done   chan error
}

// followPods lists the pods in ns matching selector (every pod when it is empty), hands
// them to listed and then each change to apply, until stopped.
func followPods(ctx context.Context, cs kubernetes.Interface, ns, selector string,
	listed func([]corev1.Pod), apply func(watch.EventType, *corev1.Pod)) (*podFollower, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		}})
	if err != nil {
		cancel()
		return nil, err
	}
	listed(list.Items)
	f := &podFollower{cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer rw.Stop()
		var failed error
		for {
			select {
			case <-ctx.Done():
				f.done <- failed
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					failed = fmt.Errorf("the watch of pods in %s ended", ns)
					<-ctx.Done()
					f.done <- failed
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						apply(ev.Type, p)
					}
				case watch.Error:
					failed = fmt.Errorf("watching pods in %s: %v", ns, ev.Object)
				}
			}
		}
	}()
	return f, nil
}

// stop ends the watch once the events so far are applied, and returns why it failed
// before, if it did.
func (f *podFollower) stop() error {
	f.cancel()
	return <-f.done
}
