package rollout

import (
	"context"
	"errors"
	"slices"
	"sync"

	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/types"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// startLocks are a replica's locks on recording starts, one per policy whose ledger a
// start writes (its fleet ledger, or its shared budget's group ledger). A burst of
// template changes under one fleet limit would otherwise race on one Lease, every write
// but one conflicting and retrying until the requests run out of time (500 at once: 9
// admitted, 487 failed on their deadline); under its lock, the replica's starts under a
// policy are recorded one after another, and only other replicas' writes conflict. Starts
// under other policies do not wait for it. The zero value is ready.
type startLocks struct {
	mu    sync.Mutex
	locks map[types.UID]*startLock
}

// startLock is one policy's lock, and how many requests hold or wait for it. full is
// closed (and replaced) when a start recorded under it fills the policy's fleet (fill).
type startLock struct {
	sem  *semaphore.Weighted
	refs int
	full chan struct{}
}

// errFilled is lock's answer to a waiter when a start recorded meanwhile filled the fleet
// of one of its policies: it decides again without the lock, as it did before it waited.
// A burst's refusals, once its fleet is full, need no lock: a refusal read without it is
// as sound as the first decision every request makes before it waits: it admits nothing,
// and a read a moment old counts a start the ledger has since let lapse, or a rollout the
// journal has since seen finish, at worst (a refusal to retry). Under the lock they
// were decided one after another, past the requests' deadlines (500 changes at once at
// 10,000 Deployments: the 50 starts admitted within a second and most of the 450 refusals
// answered "retry"). An admission still decides again under the lock.
var errFilled = errors.New("a start filled the fleet")

// lock takes the locks of the policies, in the order of their UIDs (so that two starts
// under overlapping policies never wait for each other's), waiting no longer than ctx, nor
// past a start that fills one of their fleets (errFilled) when woken is false. unlock
// releases them.
func (l *startLocks) lock(ctx context.Context, policies []*v1alpha1.RolloutPolicy, woken bool) (unlock func(), err error) {
	uids := make([]types.UID, 0, len(policies))
	for _, p := range policies {
		uids = append(uids, p.UID)
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)
	locks, full := l.get(uids)
	wait, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	for _, ch := range full {
		if !woken {
			go func() {
				select {
				case <-ch:
					stop(errFilled)
				case <-wait.Done():
				}
			}()
		}
	}
	for i, s := range locks {
		if err := s.sem.Acquire(wait, 1); err != nil {
			for _, held := range locks[:i] {
				held.sem.Release(1)
			}
			l.put(uids)
			if ctx.Err() != nil {
				return nil, ctx.Err() // the request's time ran out, whatever woke it
			}
			if errors.Is(context.Cause(wait), errFilled) {
				return nil, errFilled
			}
			return nil, err
		}
	}
	return func() {
		for _, s := range locks {
			s.sem.Release(1)
		}
		l.put(uids)
	}, nil
}

// fill wakes the requests waiting for the policy's lock (errFilled): a start just
// recorded under it filled its fleet.
func (l *startLocks) fill(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.locks[uid]; s != nil {
		close(s.full)
		s.full = make(chan struct{})
	}
}

// get is the locks of uids, each counted as held or waited for, and the channels that
// fill closes next.
func (l *startLocks) get(uids []types.UID) ([]*startLock, []chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[types.UID]*startLock{}
	}
	out, full := make([]*startLock, len(uids)), make([]chan struct{}, len(uids))
	for i, uid := range uids {
		s := l.locks[uid]
		if s == nil {
			s = &startLock{sem: semaphore.NewWeighted(1), full: make(chan struct{})}
			l.locks[uid] = s
		}
		s.refs++
		out[i], full[i] = s, s.full
	}
	return out, full
}

// put uncounts the locks of uids, forgetting those nobody holds or waits for.
func (l *startLocks) put(uids []types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, uid := range uids {
		if s := l.locks[uid]; s != nil {
			if s.refs--; s.refs == 0 {
				delete(l.locks, uid)
			}
		}
	}
}

// size is how many policies' locks are held or waited for.
func (l *startLocks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
