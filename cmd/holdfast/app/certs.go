package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// lazyCertificate serves the certificate in dir once it appears there, and every
// rotation of it after that: a certificate written by holdfast's own rotator reaches the
// mounted Secret some time after the server has started.
type lazyCertificate struct {
	ctx       context.Context
	cert, key string

	mu      sync.Mutex
	watcher *certwatcher.CertWatcher
}

func newLazyCertificate(ctx context.Context, dir string) *lazyCertificate {
	return &lazyCertificate{ctx: ctx, cert: filepath.Join(dir, "tls.crt"), key: filepath.Join(dir, "tls.key")}
}

// GetCertificate implements tls.Config.GetCertificate.
func (l *lazyCertificate) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watcher == nil {
		w, err := certwatcher.New(l.cert, l.key)
		if err != nil {
			return nil, fmt.Errorf("no serving certificate yet: %w", err)
		}
		go func() { _ = w.Start(l.ctx) }()
		l.watcher = w
	}
	return l.watcher.GetCertificate(hello)
}
