package informer

import (
	"context"
	"time"
)

// liveDeadlineKey is the context key of WithLiveDeadline.
type liveDeadlineKey struct{}

// WithLiveDeadline is ctx carrying the time by which a read that a cache passes on to the
// API server (a workload entering a selection, a watch still syncing) must end: a
// request's one deadline (budget.Deadline), which the reads it makes share. Carried as a
// value rather than as ctx's own deadline, so that a request answered from the caches
// alone allocates no timer for it.
func WithLiveDeadline(ctx context.Context, at *time.Time) context.Context {
	return context.WithValue(ctx, liveDeadlineKey{}, at)
}

// BoundLive is ctx bounded by the deadline WithLiveDeadline put in it, for a read going to
// the API server; ctx itself when it carries none.
func BoundLive(ctx context.Context) (context.Context, context.CancelFunc) {
	if at, ok := ctx.Value(liveDeadlineKey{}).(*time.Time); ok && at != nil && !at.IsZero() {
		return context.WithDeadline(ctx, *at)
	}
	return ctx, func() {}
}
