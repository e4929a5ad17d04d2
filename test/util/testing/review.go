package testing

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
)

// ReviewRequest is the request the webhook server hands a handler for an AdmissionReview
// POSTed to path, built directly so that benchmarks measure the handler, not HTTP parsing.
func ReviewRequest(path string, body []byte) *http.Request {
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: path}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
	}
	return r.WithContext(context.Background())
}

// Repeat returns a function that serves body to h, POSTed to path, each time it is called,
// and returns the recorded answer. It reuses one request (its body rewound) and one
// recorder (its body reset), so that benchmarks and allocation guards count what the
// handler does from request body to response body: net/http builds each request it
// reads whatever the handler.
func Repeat(h http.Handler, path string, body []byte) func() *httptest.ResponseRecorder {
	rd := bytes.NewReader(body)
	req := ReviewRequest(path, body)
	req.Body = io.NopCloser(rd)
	rec := httptest.NewRecorder()
	return func() *httptest.ResponseRecorder {
		rd.Reset(body)
		rec.Body.Reset()
		h.ServeHTTP(rec, req)
		return rec
	}
}
