package harness

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Balancer stands in for a Service in front of holdfast's replicas: it terminates TLS with
// the webhook's certificate and sends each request to the next ready replica in turn. Like
// the endpoints controller, it drops a replica whose readiness fails (polled every
// ReadinessPeriod). A replica that refuses connections is dropped at once and the request,
// which it never received, goes to the next ready one, as a dead endpoint drops out.
type Balancer struct {
	// Addr is host:port of the balancer's TLS listener.
	Addr     string
	backends []*backend
	next     atomic.Uint64
	srv      *http.Server
	roots    atomic.Pointer[x509.CertPool]
	// failed counts requests that could not be sent to or answered by a replica.
	failed    atomic.Int64
	transport *http.Transport
	stop      chan struct{}
}

// ReadinessPeriod is how often the balancer polls each replica's readiness.
const ReadinessPeriod = 200 * time.Millisecond

type backend struct {
	url      *url.URL
	readyURL string
	ready    atomic.Bool
	served   atomic.Int64
	inFlight atomic.Int64
	// lost counts requests the replica received but never answered: it died with them.
	lost atomic.Int64
}

// StartBalancer serves on 127.0.0.1 in front of procs, with the certificate in certDir,
// trusting the CA there for the replicas' certificates (SetRoots replaces it).
func StartBalancer(certDir string, procs []Process) (*Balancer, error) {
	caPEM, err := os.ReadFile(filepath.Join(certDir, CAFile))
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, CertFile), filepath.Join(certDir, KeyFile))
	if err != nil {
		return nil, err
	}
	b := &Balancer{stop: make(chan struct{})}
	if err := b.SetRoots(caPEM); err != nil {
		return nil, err
	}
	for _, p := range procs {
		u, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", p.WebhookPort))
		be := &backend{url: u, readyURL: p.ReadyURL()}
		be.ready.Store(true)
		b.backends = append(b.backends, be)
	}
	b.transport = &http.Transport{
		// Verified against the current roots in VerifyConnection, so that a CA bundle change
		// applies to the next handshake, as it does for the API server's webhook client.
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, //nolint:gosec // verified below
			VerifyConnection: b.verify},
		MaxIdleConnsPerHost: 32,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			be := b.pick()
			if be == nil {
				r.Out.URL = &url.URL{Scheme: "https", Host: "no-ready-endpoints.invalid"}
				return
			}
			be.served.Add(1)
			r.SetURL(be.url)
		},
		Transport: countingTransport{b},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			b.failed.Add(1)
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	b.Addr = l.Addr().(*net.TCPAddr).String()
	b.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(l) }()
	go b.watchReadiness()
	return b, nil
}

// SetRoots replaces the CAs trusted for the replicas' certificates.
func (b *Balancer) SetRoots(pemCerts []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		return errors.New("no CA certificate in the bundle")
	}
	b.roots.Store(pool)
	return nil
}

// NewConnections makes every request open its own connection (true) or reuse them.
func (b *Balancer) NewConnections(each bool) {
	b.transport.DisableKeepAlives = each
	b.transport.CloseIdleConnections()
}

func (b *Balancer) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("no server certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: b.roots.Load(), Intermediates: inter, DNSName: "127.0.0.1"})
	return err
}

func (b *Balancer) pick() *backend {
	for range b.backends {
		be := b.backends[int(b.next.Add(1)-1)%len(b.backends)]
		if be.ready.Load() {
			return be
		}
	}
	return nil
}

func (b *Balancer) watchReadiness() {
	hc := &http.Client{Timeout: time.Second}
	t := time.NewTicker(ReadinessPeriod)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		for _, be := range b.backends {
			resp, err := hc.Get(be.readyURL)
			ok := err == nil && resp.StatusCode == http.StatusOK
			if resp != nil {
				_ = resp.Body.Close()
			}
			be.ready.Store(ok)
		}
	}
}

type countingTransport struct{ b *Balancer }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// Kept, so that a request no replica received can be sent to another.
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
	}
	for range t.b.backends {
		var be *backend
		for _, x := range t.b.backends {
			if x.url.Host == r.URL.Host {
				be = x
			}
		}
		out := r.Clone(r.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		if be != nil {
			be.inFlight.Add(1)
		}
		resp, err := t.b.transport.RoundTrip(out)
		if be != nil {
			be.inFlight.Add(-1)
		}
		var op *net.OpError
		if err == nil || be == nil {
			return resp, err
		}
		if !errors.As(err, &op) || op.Op != "dial" {
			be.lost.Add(1)
			return resp, err
		}
		be.ready.Store(false)
		next := t.b.pick()
		if next == nil {
			return nil, err
		}
		next.served.Add(1)
		r.URL.Host = next.url.Host
	}
	return nil, errors.New("no replica accepted the connection")
}

// Counts returns how many requests each replica has been sent so far.
func (b *Balancer) Counts() []int64 {
	out := make([]int64, len(b.backends))
	for i, be := range b.backends {
		out[i] = be.served.Load()
	}
	return out
}

// InFlight returns how many requests replica i is answering now.
func (b *Balancer) InFlight(i int) int64 { return b.backends[i].inFlight.Load() }

// Lost returns how many requests replica i received and never answered so far.
func (b *Balancer) Lost(i int) int64 { return b.backends[i].lost.Load() }

// Failed counts requests that no replica answered (connection or TLS errors, no ready replica).
func (b *Balancer) Failed() int64 { return b.failed.Load() }

// Close stops the balancer.
func (b *Balancer) Close() error {
	close(b.stop)
	return b.srv.Close()
}
