//go:build integration

package integration

import (
	"crypto/tls"
	"net"
	"strconv"
	"testing"
)

// TestWebhookServesOnlyTLS13AndHTTP1 checks the webhook server's hardening: TLS below 1.3
// is refused, and a client offering HTTP/2 gets HTTP/1.1.
func TestWebhookServesOnlyTLS13AndHTTP1(t *testing.T) {
	addr := net.JoinHostPort(webhookHost, strconv.Itoa(webhookPort))
	old := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12} //nolint:gosec // probing the server's versions
	if conn, err := tls.Dial("tcp", addr, old); err == nil {
		conn.Close()
		t.Error("a TLS 1.2 handshake succeeded; want TLS 1.3 only")
	}
	h2 := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}} //nolint:gosec // probing ALPN
	conn, err := tls.Dial("tcp", addr, h2)
	if err != nil {
		t.Fatalf("TLS 1.3 handshake: %v", err)
	}
	defer conn.Close()
	if s := conn.ConnectionState(); s.Version != tls.VersionTLS13 || s.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated %x %q, want TLS 1.3 and http/1.1", s.Version, s.NegotiatedProtocol)
	}
}
