package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
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
	// unreachable is a closed port on 127.0.0.1: requests that find no ready replica are
	// sent there and fail at once, without leaving the loopback range.
	unreachable string
	// noReady counts requests that found no ready replica.
	noReady atomic.Int64
	mu      sync.Mutex
	changes []ReadinessChange
}

// ReadinessPeriod is how often the balancer polls each replica's readiness.
const ReadinessPeriod = 200 * time.Millisecond

// ReadinessChange is a replica's readiness as the balancer saw it change.
type ReadinessChange struct {
	At      time.Time
	Replica int
	Ready   bool
	// Probe is how long the probe that saw the change took (0 when a request saw it);
	// Answer is what it got (the failed checks, or the error).
	Probe  time.Duration
	Answer string
}

func (c ReadinessChange) String() string {
	state := "unready"
	if c.Ready {
		state = "ready"
	}
	if c.Probe == 0 {
		return fmt.Sprintf("%s replica %d %s (%s)", c.At.Format("15:04:05.000"), c.Replica, state, c.Answer)
	}
	return fmt.Sprintf("%s replica %d %s (probe %s: %s)", c.At.Format("15:04:05.000"), c.Replica, state, c.Probe.Round(time.Millisecond), c.Answer)
}

type backend struct {
	url      *url.URL
	readyURL string
	ready    atomic.Bool
	served   atomic.Int64
	inFlight atomic.Int64
	// lost counts requests the replica received but never answered: it died with them.
	lost atomic.Int64
}

// StartBalancer serves on 127.0.0.1:port in front of procs, with the certificate in
// certDir, trusting roots for the replicas' certificates (SetRoots replaces them).
func StartBalancer(port int, certDir string, roots []byte, procs []Process) (*Balancer, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, CertFile), filepath.Join(certDir, KeyFile))
	if err != nil {
		return nil, err
	}
	closed, err := closedPort()
	if err != nil {
		return nil, err
	}
	b := &Balancer{stop: make(chan struct{}), unreachable: closed}
	if err := b.SetRoots(roots); err != nil {
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
				b.noReady.Add(1)
				r.Out.URL = &url.URL{Scheme: "https", Host: b.unreachable}
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
	l, err := tls.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{Certificates: []tls.Certificate{cert},
		MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	b.Addr = l.Addr().(*net.TCPAddr).String()
	b.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(l) }()
	for i, be := range b.backends {
		go b.watchReadiness(i, be)
	}
	return b, nil
}

// closedPort returns 127.0.0.1:port for a port that was free a moment ago and that nothing
// listens on now: a connection there is refused.
func closedPort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
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

// pick returns the next ready replica in turn, or nil when none is ready. Each call scans
// every replica once from its own starting point: concurrent calls advance the shared
// counter between each other's steps, and stepping it per replica tried could skip the
// only ready one.
func (b *Balancer) pick() *backend {
	start := int((b.next.Add(1) - 1) % uint64(len(b.backends)))
	for k := range b.backends {
		if be := b.backends[(start+k)%len(b.backends)]; be.ready.Load() {
			return be
		}
	}
	return nil
}

// WaitReady waits until the balancer sends requests to replica i again, as a rolling
// update waits for the new pod's endpoint to be ready before it stops the next one.
func (b *Balancer) WaitReady(ctx context.Context, i int, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, ReadinessPeriod/4, timeout, true, func(context.Context) (bool, error) {
		return b.backends[i].ready.Load(), nil
	})
	if err != nil {
		return fmt.Errorf("the balancer did not see replica %d ready within %s", i, timeout)
	}
	return nil
}

// watchReadiness polls one replica's readiness. Each replica has its own poller, as each
// pod has its own prober, so that a replica whose probe hangs does not delay what the
// balancer learns of the others.
func (b *Balancer) watchReadiness(i int, be *backend) {
	hc := &http.Client{Timeout: time.Second}
	t := time.NewTicker(ReadinessPeriod)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		// verbose names the failed checks in the answer.
		resp, err := hc.Get(be.readyURL + "?verbose")
		took := time.Since(start)
		ok := err == nil && resp.StatusCode == http.StatusOK
		answer := "ok"
		if err != nil {
			answer = err.Error()
		} else {
			if !ok {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				answer = failedChecks(resp.Status, string(body))
			}
			_ = resp.Body.Close()
		}
		if be.ready.Swap(ok) != ok {
			b.record(ReadinessChange{At: start, Replica: i, Ready: ok, Probe: took, Answer: answer})
		}
	}
}

// failedChecks keeps the lines of a healthz answer that name a failed check.
func failedChecks(status, body string) string {
	failed := []string{status}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, strings.TrimPrefix(line, "[-]"))
		}
	}
	return strings.Join(failed, "; ")
}

func (b *Balancer) record(c ReadinessChange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = append(b.changes, c)
}

// ReadinessChanges returns the replicas' readiness changes the balancer saw since t.
func (b *Balancer) ReadinessChanges(since time.Time) []ReadinessChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ReadinessChange
	for _, c := range b.changes {
		if !c.At.Before(since) {
			out = append(out, c)
		}
	}
	return out
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
		i := 0
		for j, x := range t.b.backends {
			if x.url.Host == r.URL.Host {
				be, i = x, j
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
		if be.ready.Swap(false) {
			t.b.record(ReadinessChange{At: time.Now(), Replica: i, Answer: "a request's connection was refused"})
		}
		next := t.b.pick()
		if next == nil {
			t.b.noReady.Add(1)
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

// NoReady counts requests that found no ready replica.
func (b *Balancer) NoReady() int64 { return b.noReady.Load() }

// Close stops the balancer.
func (b *Balancer) Close() error {
	close(b.stop)
	return b.srv.Close()
}
