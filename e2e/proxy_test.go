//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/holdfast-dev/holdfast/internal/devcluster"
)

// balancer stands in for a Service in front of holdfast's replicas: it terminates TLS
// with the webhook's certificate and sends each request to the next replica in turn.
type balancer struct {
	addr     string
	backends []*url.URL
	served   []atomic.Int64
	next     atomic.Uint64
	srv      *http.Server
}

func startBalancer(certDir string, ports []int) (*balancer, error) {
	caPEM, err := os.ReadFile(filepath.Join(certDir, devcluster.CAFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, devcluster.CertFile), filepath.Join(certDir, devcluster.KeyFile))
	if err != nil {
		return nil, err
	}
	b := &balancer{served: make([]atomic.Int64, len(ports))}
	for _, p := range ports {
		u, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", p))
		b.backends = append(b.backends, u)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			i := int(b.next.Add(1)-1) % len(b.backends)
			b.served[i].Add(1)
			r.SetURL(b.backends[i])
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}},
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	b.addr = l.Addr().(*net.TCPAddr).String()
	b.srv = &http.Server{Handler: proxy}
	go func() { _ = b.srv.Serve(l) }()
	return b, nil
}

// counts returns how many requests each replica has been sent so far.
func (b *balancer) counts() []int64 {
	out := make([]int64, len(b.served))
	for i := range b.served {
		out[i] = b.served[i].Load()
	}
	return out
}
