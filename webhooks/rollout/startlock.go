package rollout

import (
	"context"
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

// startLock is one policy's lock, and how many requests hold or wait for it.
type startLock struct {
	sem  *semaphore.Weighted
	refs int
}

// lock takes the locks of the policies, in the order of their UIDs (so that two starts
// under overlapping policies never wait for each other's), waiting no longer than ctx.
// unlock releases them.
func (l *startLocks) lock(ctx context.Context, policies []*v1alpha1.RolloutPolicy) (unlock func(), err error) {
	uids := make([]types.UID, 0, len(policies))
	for _, p := range policies {
		uids = append(uids, p.UID)
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)
	locks := l.get(uids)
	for i, s := range locks {
		if err := s.sem.Acquire(ctx, 1); err != nil {
			for _, held := range locks[:i] {
				held.sem.Release(1)
			}
			l.put(uids)
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

// get is the locks of uids, each counted as held or waited for.
func (l *startLocks) get(uids []types.UID) []*startLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[types.UID]*startLock{}
	}
	out := make([]*startLock, len(uids))
	for i, uid := range uids {
		s := l.locks[uid]
		if s == nil {
			s = &startLock{sem: semaphore.NewWeighted(1)}
			l.locks[uid] = s
		}
		s.refs++
		out[i] = s
	}
	return out
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
