package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// NewScheme is holdfast's scheme plus CustomResourceDefinitions, for clients that read
// holdfast's CRDs.
func NewScheme() *runtime.Scheme {
	s := informer.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// Process describes one local holdfast replica.
type Process struct {
	Binary     string
	Kubeconfig string
	CertDir    string
	Namespace  string
	// WebhookPort, MetricsPort and ProbePort are on 127.0.0.1.
	WebhookPort, MetricsPort, ProbePort int
	// FailurePolicy and TimeoutSeconds are those of the webhook entries the leader derives
	// from the policies (for policies that set none); empty and zero keep holdfast's defaults.
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	Stdout    io.Writer
	Stderr    io.Writer
}

// Command returns the command that runs the replica.
func (p Process) Command(ctx context.Context) *exec.Cmd {
	args := []string{
		"serve",
		"--kubeconfig", p.Kubeconfig,
		"--cert-dir", p.CertDir,
		"--namespace", p.Namespace,
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(p.WebhookPort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(p.MetricsPort),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(p.ProbePort),
		"--webhook-configuration", WebhookConfigName,
	}
	if p.FailurePolicy != "" {
		args = append(args, "--rollout-failure-policy", string(p.FailurePolicy), "--eviction-failure-policy", string(p.FailurePolicy))
	}
	if p.TimeoutSeconds != 0 {
		t := strconv.Itoa(int(p.TimeoutSeconds))
		args = append(args, "--rollout-timeout-seconds", t, "--eviction-timeout-seconds", t)
	}
	cmd := exec.CommandContext(ctx, p.Binary, append(args, p.ExtraArgs...)...)
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	return cmd
}

// FreePorts returns n TCP ports free on 127.0.0.1 at the time of the call.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ReadyURL is the replica's readiness endpoint.
func (p Process) ReadyURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/readyz", p.ProbePort)
}

// WaitReady polls the replica's readiness endpoint until it answers 200 or timeout passes.
func (p Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ReadyURL(), nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = fmt.Sprintf("%s: %s", resp.Status, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("holdfast at %s not ready after %s (last answer: %s)", p.ReadyURL(), timeout, last)
	}
	return nil
}
