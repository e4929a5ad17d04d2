// Package review serves admission webhooks with a lean AdmissionReview codec.
//
// controller-runtime's admission.Webhook decodes a review with the API machinery's
// universal deserializer, which costs more than holdfast's decisions for the 10–30 KB
// reviews of large workloads. Webhook reads the body once, decodes it with
// github.com/go-json-experiment/json (the implementation of encoding/json/v2), and hands
// the request to admission.Webhook.Handle, which keeps controller-runtime's logging, panic
// recovery and response completion.
package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/apijson"
)

// MaxBodyBytes caps a review's body, as controller-runtime does: two objects at the API
// server's request size limit with room to spare.
const MaxBodyBytes = 7 << 20

// Webhook serves one admission.Webhook over HTTP.
type Webhook struct {
	*admission.Webhook
	opts jsonv2.Options
}

// NewWebhook serves wh. objects, when not nil, decodes the request's embedded objects
// in the same pass over the body as the rest of the review (see ObjectDecoder). Unless wh
// has a LogConstructor, its request loggers are RequestLogger's.
func NewWebhook(wh *admission.Webhook, objects ObjectDecoder) *Webhook {
	if wh.LogConstructor == nil {
		wh.LogConstructor = RequestLogger
	}
	return &Webhook{Webhook: wh, opts: decodeOptions(objects)}
}

// An ObjectDecoder reads a request's embedded object (object, oldObject and options)
// straight from the review's JSON stream, so that its bytes are scanned once. What it
// returns is the RawExtension's Object; Raw still holds the object's JSON, a slice of the
// body. It is called for non-null objects only.
type ObjectDecoder func(dec *jsontext.Decoder) (runtime.Object, error)

// decodeOptions are the options that decode a review with objects. They are built once:
// encoding/json/v2 caches its decoders per set of unmarshalers.
// Without objects, the objects' JSON is kept as a slice of the body all the same, rather
// than copied.
func decodeOptions(objects ObjectDecoder) jsonv2.Options {
	return jsonv2.JoinOptions(apijson.Options(), jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(
		func(dec *jsontext.Decoder, re *runtime.RawExtension) error {
			if dec.PeekKind() == 'n' {
				return errors.ErrUnsupported // the default: no object
			}
			before := dec.UnreadBuffer()
			var obj runtime.Object
			var err error
			if objects != nil {
				obj, err = objects(dec)
			} else {
				err = dec.SkipValue()
			}
			if err != nil {
				return err
			}
			raw := before[:len(before)-len(dec.UnreadBuffer())]
			re.Raw = bytes.TrimLeft(raw, " \t\r\n:")
			re.Object = obj
			return nil
		})))
}

// ServeHTTP implements http.Handler. Bad requests are answered like controller-runtime
// answers them: an AdmissionReview whose response carries the HTTP status in its result.
func (wh *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, code, err := read(r, wh.opts)
	if err != nil {
		logf.Log.WithName("admission").Error(err, "Bad admission request", "path", r.URL.Path)
		write(w, admission.Errored(code, err))
		return
	}
	write(w, wh.Handle(r.Context(), req))
}

// decode reads an admission.k8s.io/v1 AdmissionReview request from body, with the options
// of decodeOptions. The request may share memory with body.
func decode(body []byte, opts jsonv2.Options) (admission.Request, error) {
	in := &struct { // one allocation for both
		ar  admissionv1.AdmissionReview
		req admission.Request
	}{}
	ar := &in.ar
	ar.Request = &in.req.AdmissionRequest
	if err := jsonv2.Unmarshal(body, ar, opts); err != nil {
		return in.req, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if ar.APIVersion != "admission.k8s.io/v1" || ar.Kind != "AdmissionReview" {
		return in.req, fmt.Errorf("unsupported %q of apiVersion %q: holdfast reads admission.k8s.io/v1 AdmissionReviews", ar.Kind, ar.APIVersion)
	}
	if ar.Request == nil || ar.Request.UID == "" {
		return in.req, errors.New("the AdmissionReview has no request, or a request without uid")
	}
	return in.req, nil
}

func read(r *http.Request, opts jsonv2.Options) (admission.Request, int32, error) {
	if r.Method != http.MethodPost {
		return admission.Request{}, http.StatusMethodNotAllowed, fmt.Errorf("method %s: admission reviews are POSTed", r.Method)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return admission.Request{}, http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return admission.Request{}, http.StatusBadRequest, errors.New("request body is empty")
	}
	defer r.Body.Close()
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= MaxBodyBytes {
		body = make([]byte, n)
		if _, err = io.ReadFull(r.Body, body); err != nil {
			return admission.Request{}, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
		}
	} else if body, err = io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1)); err != nil {
		return admission.Request{}, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > MaxBodyBytes || r.ContentLength > MaxBodyBytes {
		return admission.Request{}, http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", MaxBodyBytes)
	}
	req, err := decode(body, opts)
	if err != nil {
		return req, http.StatusBadRequest, err
	}
	return req, 0, nil
}

// jsonContentType is the Content-Type header's value, shared by every answer.
var jsonContentType = []string{"application/json"}

// write answers with an admission.k8s.io/v1 AdmissionReview.
func write(w http.ResponseWriter, resp admission.Response) {
	out := &struct { // one allocation for the review and the response it points to
		ar   admissionv1.AdmissionReview
		resp admissionv1.AdmissionResponse
	}{ar: admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}},
		resp: resp.AdmissionResponse}
	out.ar.Response = &out.resp
	w.Header()["Content-Type"] = jsonContentType
	if err := json.NewEncoder(w).Encode(&out.ar); err != nil {
		logf.Log.WithName("admission").Error(err, "Writing the admission response")
	}
}
