package rollout

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/review"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// decideBoth sends one review through the lean path holdfast serves (one pass over the
// body, templates compared by fingerprint, decoded only when a rule reads them) and
// through the typed reference (controller-runtime's codec, whole objects decoded,
// templates compared semantically), and fails when their responses differ.
func decideBoth(t *testing.T, s hostedScene, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	lean := review.NewWebhook(&admission.Webhook{Handler: s.handler(t)}, workload.DecodeObject)
	typedHandler := s.handler(t)
	typedHandler.Typed = true
	typed := &admission.Webhook{Handler: typedHandler}
	var got [2]*admissionv1.AdmissionResponse
	for i, h := range []http.Handler{lean, typed} {
		got[i] = serve(t, h, body).Response
	}
	if diff := cmp.Diff(got[1], got[0]); diff != "" {
		t.Errorf("the lean path decides differently from the typed reference (-typed +lean):\n%s", diff)
	}
	return got[0]
}

func TestLeanDecidesAsTyped(t *testing.T) {
	cases := map[string]struct {
		p       sceneParams
		allowed bool
	}{
		"new image after a complete rollout":           {sceneParams{image: "v1.37.2", replicas: 3, serverCount: 3}, true},
		"no template change":                           {sceneParams{image: "v1.37.1", replicas: 3, serverCount: 3}, true},
		"back to revision 3 (flapping)":                {sceneParams{image: "v1.37.0", replicas: 3, serverCount: 3}, false},
		"new image while rolling out":                  {sceneParams{image: "v1.37.2", replicas: 3, serverCount: 3, rollingOut: true}, false},
		"rollback to the serving revision 3":           {sceneParams{image: "v1.37.0", replicas: 3, serverCount: 3, rollingOut: true}, true},
		"scale with --server-count":                    {sceneParams{image: "v1.37.1", replicas: 5, serverCount: 5}, true},
		"scale with --server-count while rolling out":  {sceneParams{image: "v1.37.1", replicas: 5, serverCount: 5, rollingOut: true}, false},
		"scale without --server-count":                 {sceneParams{image: "v1.37.1", replicas: 5, serverCount: 3}, false},
		"new image, strategy lints":                    {sceneParams{image: "v1.37.2", replicas: 3, serverCount: 3, lints: true}, false},
		"scale and new image while rolling out, lints": {sceneParams{image: "v1.37.2", replicas: 5, serverCount: 5, rollingOut: true, lints: true}, false},
	}
	for name, c := range cases {
		// Revisions with their templates (the typed path compares them semantically) and
		// known only by fingerprint, as holdfast's cache keeps them.
		for _, slim := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/slim=%t", name, slim), func(t *testing.T) {
				c.p.slim = slim
				s := newScene(t, c.p)
				resp := decideBoth(t, s, s.review(t))
				if resp.Allowed != c.allowed {
					t.Errorf("allowed = %t, want %t: %v", resp.Allowed, c.allowed, resp.Result)
				}
			})
		}
	}
}

// FuzzLeanDecidesAsTyped explores the hosted scene's parameters, holding the lean path to
// the typed reference; its seeds run with the unit tests.
func FuzzLeanDecidesAsTyped(f *testing.F) {
	f.Add("v1.37.2", int32(3), int32(3), false, false)
	f.Add("v1.37.0", int32(3), int32(3), true, false)
	f.Add("v1.37.1", int32(4), int32(3), true, true)
	f.Add("v1.37.0", int32(0), int32(-1), false, true)
	f.Fuzz(func(t *testing.T, image string, replicas, serverCount int32, rollingOut, lints bool) {
		s := newScene(t, sceneParams{image: image, replicas: replicas, serverCount: serverCount, rollingOut: rollingOut, lints: lints, slim: len(image)%2 == 0})
		decideBoth(t, s, s.review(t))
	})
}

// FuzzRolloutReview sends arbitrary bodies to the webhook as the API server would: every
// answer is a well-formed AdmissionReview, nothing panics, and the lean path never allows
// what the typed reference forbids.
func FuzzRolloutReview(f *testing.F) {
	s := newHostedScene(f)
	for _, p := range []sceneParams{{image: "v1.37.2", replicas: 3, serverCount: 3}, {image: "v1.37.0", replicas: 5, serverCount: 3, rollingOut: true}} {
		f.Add(newScene(f, p).review(f))
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"UPDATE","namespace":"tenant-a","object":{"spec":{"replicas":5,"template":{}}},"oldObject":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`))
	f.Add([]byte(`{"request":`))
	lean := review.NewWebhook(&admission.Webhook{Handler: s.handler(f)}, workload.DecodeObject)
	typedHandler := s.handler(f)
	typedHandler.Typed = true
	typed := &admission.Webhook{Handler: typedHandler}
	f.Fuzz(func(t *testing.T, body []byte) {
		l := serve(t, lean, body).Response
		if !l.Allowed && (l.Result == nil || l.Result.Code == 0 || l.Result.Message == "") {
			t.Fatalf("a refusal without a code and message: %+v", l.Result)
		}
		ty := serve(t, typed, body).Response
		if l.Allowed && !ty.Allowed && ty.Result != nil && ty.Result.Code == http.StatusForbidden {
			t.Fatalf("the lean path allowed what the typed reference forbids: %s", ty.Result.Message)
		}
	})
}
