package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
)

// noopWebhook is the floor any out-of-process webhook pays: it answers allowed, echoing
// the request's uid and nothing else, with holdfast's TLS and HTTP/1.1 settings and its
// certificate.
type noopWebhook struct {
	srv   *http.Server
	addr  string
	calls atomic.Int64
}

func startNoopWebhook(certDir string) (*noopWebhook, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	for _, opt := range app.TLSOpts() {
		opt(cfg)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return nil, err
	}
	n := &noopWebhook{addr: ln.Addr().(*net.TCPAddr).String()}
	n.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.calls.Add(1)
		var in struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, in.Request.UID)
	})}
	go func() { _ = n.srv.Serve(ln) }()
	return n, nil
}

func (n *noopWebhook) Close() error { return n.srv.Close() }
