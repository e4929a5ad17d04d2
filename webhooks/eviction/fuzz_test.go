package eviction

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// FuzzEvictionReview sends arbitrary bodies to the eviction webhook: every answer is a
// well-formed AdmissionReview whose refusals carry a code and a message; nothing panics.
func FuzzEvictionReview(f *testing.F) {
	h, body := unselectedScene(f)
	f.Add(body)
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"policy","version":"v1","kind":"Eviction"},"resource":{"version":"v1","resource":"pods"},"subResource":"eviction","name":"a","namespace":"shop","operation":"CREATE","object":{"metadata":{"name":"b"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":null}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := utiltesting.Repeat(h, Path, body)()
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil || ar.Response == nil {
			t.Fatalf("answer %q is not an AdmissionReview: %v", rec.Body.String(), err)
		}
		if r := ar.Response; !r.Allowed && (r.Result == nil || r.Result.Code == 0 || r.Result.Message == "") {
			t.Fatalf("a refusal without a code and message: %+v", r.Result)
		}
	})
}
