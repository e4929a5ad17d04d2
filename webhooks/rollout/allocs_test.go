package rollout

import (
	"net/http"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/review"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// maxReviewAllocs guards BenchmarkRolloutReview's allocations (157 when this was written)
// in every test run: a change that makes the lean path decode whole objects again, copy
// the cache, or compile selectors per request fails here. Allocations are counted, never
// time.
const maxReviewAllocs = 175

func TestRolloutReviewAllocs(t *testing.T) {
	s := newHostedScene(t)
	body := s.review(t)
	h := review.NewWebhook(&admission.Webhook{Handler: s.handler(t)}, workload.DecodeObject)
	w := &discard{header: http.Header{}}
	if r := serve(t, h, body, w); !r.Response.Allowed {
		t.Fatalf("denied: %v", r.Response.Result)
	}
	if n := testing.AllocsPerRun(100, func() { serve(nil, h, body, w) }); n > maxReviewAllocs {
		t.Errorf("a 13 KB Deployment UPDATE review allocates %.0f times, more than %d", n, maxReviewAllocs)
	}
}
