package testing

import (
	"bytes"
	"context"
	"io"
	"net/http"
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
