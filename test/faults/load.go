package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

const loadNamespace = "faults"

// load sends rate server-side dry-run updates per second of a konnectivity Deployment
// through the API server: nine in ten change the pod template and must be allowed; one in
// ten scales without --server-count and must be denied by holdfast.
type load struct {
	c      client.Client
	base   *appsv1.Deployment
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup

	sent, failed, wronglyAllowed, skipped atomic.Int64
	mu                                    sync.Mutex
	lastError                             string
}

// counts is a snapshot of the load's counters.
type counts struct{ sent, failed, wronglyAllowed, skipped int64 }

func (a counts) minus(b counts) counts {
	return counts{a.sent - b.sent, a.failed - b.failed, a.wronglyAllowed - b.wronglyAllowed, a.skipped - b.skipped}
}

func newLoad(ctx context.Context, c client.Client, rate int) (*load, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loadNamespace}}); err != nil {
		return nil, err
	}
	p := utiltesting.MakeRolloutPolicy("faults").ArgMatchesReplicas("konnectivity-server", "--server-count").
		NamespaceSelector(map[string]string{corev1.LabelMetadataName: loadNamespace}).Obj()
	if err := c.Create(ctx, p); err != nil {
		return nil, err
	}
	d := utiltesting.MakeDeployment(loadNamespace, "kube-apiserver").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
	d.Spec.Template.Annotations = map[string]string{}
	if err := c.Create(ctx, d); err != nil {
		return nil, err
	}
	l := &load{c: c, base: d}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return l.send(ctx, 0) == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("holdfast never enforced the load's policy: %s", l.lastError)
	}
	l.sent.Store(0)
	l.failed.Store(0)
	l.ctx, l.cancel = context.WithCancel(ctx)
	ctx = l.ctx
	work := make(chan int)
	for range 48 {
		l.done.Go(func() {
			for i := range work {
				_ = l.send(ctx, i)
			}
		})
	}
	l.done.Go(func() {
		defer close(work)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			select {
			case work <- i:
			default:
				l.skipped.Add(1) // every worker busy: the load is behind, not failing
			}
		}
	})
	return l, nil
}

// send sends request i and classifies the answer.
func (l *load) send(ctx context.Context, i int) error {
	d := l.base.DeepCopy()
	forbidden := i%10 == 0
	if forbidden {
		d.Spec.Replicas = ptr.To[int32](5)
	} else {
		d.Spec.Template.Annotations = map[string]string{"faults.holdfast.dev/request": strconv.Itoa(i)}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := l.c.Update(ctx, d, client.DryRunAll)
	if l.ctx != nil && l.ctx.Err() != nil {
		return nil // stopped mid-request: not an answer
	}
	l.sent.Add(1)
	switch {
	case forbidden && err == nil:
		l.wronglyAllowed.Add(1)
		return fmt.Errorf("allowed a scale without --server-count")
	case forbidden && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "holdfast.dev"):
		return nil
	case err != nil:
		l.failed.Add(1)
		l.mu.Lock()
		l.lastError = err.Error()
		l.mu.Unlock()
		return err
	}
	return nil
}

func (l *load) snapshot() counts {
	return counts{l.sent.Load(), l.failed.Load(), l.wronglyAllowed.Load(), l.skipped.Load()}
}

func (l *load) lastErr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastError
}

func (l *load) stop() {
	l.cancel()
	l.done.Wait()
}
