package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// serve measures reviews/s and latency straight at the replica, over TLS 1.3 with
// keep-alive: the 13 KB tenant kube-apiserver UPDATE of the Go benchmark, whose history
// (two ReplicaSets) and policy are in the cluster, hence in holdfast's caches.
func (b *bench) serve(ctx context.Context, o options) error {
	allowed, hc, url, err := b.tenant(ctx)
	if err != nil {
		return err
	}

	// Unpaced: o.workers connections, each sending its next review as soon as the last is answered.
	lat, errs, elapsed := load(ctx, o.window, o.workers, nil, func(ctx context.Context) error { return expectAllowed(post(ctx, hc, url, allowed)) })
	s := sorted(lat)
	report("serve-unpaced-reviews-per-second", float64(len(lat))/elapsed.Seconds(), "reviews/s")
	report("serve-unpaced-p50", percentile(s, 0.50), "ms")
	report("serve-unpaced-p99", percentile(s, 0.99), "ms")
	report("serve-unpaced-errors", float64(errs), "errors")

	// Paced: o.rate reviews/s.
	tick := time.NewTicker(time.Second / time.Duration(o.rate))
	defer tick.Stop()
	before := b.webhookLatency()
	lat, errs, elapsed = load(ctx, o.window, 16, tick.C, func(ctx context.Context) error { return expectAllowed(post(ctx, hc, url, allowed)) })
	after := b.webhookLatency()
	s = sorted(lat)
	report(fmt.Sprintf("serve-%drps-achieved", o.rate), float64(len(lat))/elapsed.Seconds(), "reviews/s")
	report(fmt.Sprintf("serve-%drps-p50", o.rate), percentile(s, 0.50), "ms")
	report(fmt.Sprintf("serve-%drps-p99", o.rate), percentile(s, 0.99), "ms")
	if n := after.count - before.count; n > 0 {
		// Of that, the part spent inside holdfast's webhook server (its latency metric).
		report(fmt.Sprintf("serve-%drps-served-mean", o.rate), (after.sum-before.sum)/n*1000, "ms")
	}
	report(fmt.Sprintf("serve-%drps-errors", o.rate), float64(errs), "errors")
	report("serve-review-size", float64(len(allowed))/1024, "KiB")

	// The floor of this machine: the same paced load against another process that reads
	// each review and answers "allowed" without looking at it, over the same TLS 1.3
	// keep-alive.
	noop, err := startNoop(ctx)
	if err != nil {
		return err
	}
	defer noop.stop()
	lat, errs, _ = load(ctx, o.window, 16, tick.C, func(ctx context.Context) error {
		return expectAllowed(post(ctx, noop.client, noop.url, allowed))
	})
	s = sorted(lat)
	report(fmt.Sprintf("serve-%drps-noop-p50", o.rate), percentile(s, 0.50), "ms")
	report(fmt.Sprintf("serve-%drps-noop-p99", o.rate), percentile(s, 0.99), "ms")
	report(fmt.Sprintf("serve-%drps-noop-errors", o.rate), float64(errs), "errors")
	return nil
}

// tenant puts the serving measurement's tenant in the cluster (once): a policy, the tenant
// kube-apiserver and its two ReplicaSets; and returns the review of its allowed update, a
// keep-alive client that trusts holdfast, and the rollout webhook's URL.
func (b *bench) tenant(ctx context.Context) ([]byte, *http.Client, string, error) {
	const ns = "tenant-serve"
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.webhooks.LocalServingCAData)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}},
		MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false,
	}}
	url := b.webhook + rollout.Path
	d := &appsv1.Deployment{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kube-apiserver"}, d); err == nil {
		allowed, err := reviewBody(ns, d.UID, "v1.37.2", 3)
		return allowed, hc, url, err
	}
	if err := namespace(ctx, b.c, ns, map[string]string{"holdfast.dev/hosted-control-plane": "true"}); err != nil {
		return nil, nil, "", err
	}
	p := utiltesting.MakeRolloutPolicy("serve").Kinds(v1alpha1.KindDeployment).
		NamespaceSelector(map[string]string{"kubernetes.io/metadata.name": ns}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
	p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: 10 * time.Minute}
	if err := b.c.Create(ctx, p); err != nil {
		return nil, nil, "", err
	}
	d = utiltesting.HostedKubeAPIServer(ns, 3, "v1.37.1")
	d.ManagedFields, d.ResourceVersion, d.UID, d.CreationTimestamp = nil, "", "", metav1.Time{}
	d.Status = appsv1.DeploymentStatus{}
	if err := b.c.Create(ctx, d); err != nil {
		return nil, nil, "", err
	}
	for i, image := range []string{"v1.37.0", "v1.37.1"} {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-apiserver-" + fmt.Sprint(i),
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(3 + i)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}}}
		rs.Spec.Selector = d.Spec.Selector
		rs.Spec.Template = *utiltesting.HostedKubeAPIServer(ns, 3, image).Spec.Template.DeepCopy()
		rs.Labels = rs.Spec.Template.Labels // as kube's Deployment controller labels its ReplicaSets
		rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = fmt.Sprintf("hash%d", i)
		if err := b.c.Create(ctx, rs); err != nil {
			return nil, nil, "", err
		}
	}
	allowed, err := reviewBody(ns, d.UID, "v1.37.2", 3)
	if err != nil {
		return nil, nil, "", err
	}
	denied, err := reviewBody(ns, d.UID, "v1.37.1", 5) // --server-count left at 3
	if err != nil {
		return nil, nil, "", err
	}

	// Wait until the replica's caches hold the policy: the bad review is denied.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := post(ctx, hc, url, denied)
		return err == nil && !ok, nil
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("holdfast never enforced the serving policy: %w", err)
	}
	if ok, err := post(ctx, hc, url, allowed); err != nil || !ok {
		return nil, nil, "", fmt.Errorf("the measured review must be allowed: allowed=%t, %v", ok, err)
	}
	return allowed, hc, url, nil
}

// noopAddress is what the no-op server prints when it serves: its URL and certificate.
type noopAddress struct {
	URL  string `json:"url"`
	Cert []byte `json:"cert"`
}

// serveNoop is the no-op server's process (--noop-server): it answers every AdmissionReview
// "allowed", echoing the request's uid (as the API server requires) and nothing else, over
// TLS 1.3 and HTTP/1.1 as holdfast serves, until its standard input closes. It is the floor
// any out-of-process webhook pays.
func serveNoop() error {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Request struct {
				UID types.UID `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, in.Request.UID)
	}))

	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}}
	srv.StartTLS()
	defer srv.Close()
	if err := json.NewEncoder(os.Stdout).Encode(noopAddress{URL: srv.URL, Cert: srv.Certificate().Raw}); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

type noopProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string
	// cert is the server's self-signed certificate (DER).
	cert   []byte
	client *http.Client
}

// startNoop runs this harness again as the no-op server, in a process of its own as
// holdfast is.
func startNoop(ctx context.Context) (*noopProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "--noop-server")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &noopProcess{cmd: cmd, stdin: stdin}
	var addr noopAddress
	if err := json.NewDecoder(stdout).Decode(&addr); err != nil {
		n.stop()
		return nil, fmt.Errorf("reading the no-op server's address: %w", err)
	}
	cert, err := x509.ParseCertificate(addr.Cert)
	if err != nil {
		n.stop()
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	n.url, n.cert = addr.URL, addr.Cert
	n.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}},
		MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false,
	}}
	return n, nil
}

func (n *noopProcess) stop() {
	_ = n.stdin.Close()
	_ = n.cmd.Wait()
}

func expectAllowed(ok bool, err error) error {
	if err == nil && !ok {
		return fmt.Errorf("denied")
	}
	return err
}

// load runs workers until window passes; with pace, each request waits for a tick.
// It returns each successful request's latency and the number of failed ones.
func load(ctx context.Context, window time.Duration, workers int, pace <-chan time.Time, do func(context.Context) error) ([]time.Duration, int, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var mu sync.Mutex
	var all []time.Duration
	errs := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var mine []time.Duration
			failed := 0
			for ctx.Err() == nil {
				if pace != nil {
					select {
					case <-pace:
					case <-ctx.Done():
						continue
					}
				}
				t := time.Now()
				err := do(context.Background())
				if err != nil {
					failed++
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			all, errs = append(all, mine...), errs+failed
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, errs, time.Since(start)
}

// post sends one review and reports whether it was allowed.
func post(ctx context.Context, hc *http.Client, url string, body []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s: %s", resp.Status, raw)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &ar); err != nil || ar.Response == nil {
		return false, fmt.Errorf("undecodable answer %q: %v", raw, err)
	}
	if ar.Response.Result != nil && ar.Response.Result.Code >= 500 {
		return false, fmt.Errorf("holdfast failed: %s", ar.Response.Result.Message)
	}
	return ar.Response.Allowed, nil
}

// reviewBody is the AdmissionReview of an UPDATE of the tenant kube-apiserver from
// v1.37.1 with 3 replicas to image and replicas, --server-count staying 3.
func reviewBody(ns string, uid types.UID, image string, replicas int32) ([]byte, error) {
	old := utiltesting.HostedKubeAPIServer(ns, 3, "v1.37.1")
	old.UID = uid
	new := old.DeepCopy()
	new.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/kube-apiserver:" + image
	new.Spec.Replicas = ptr.To(replicas)
	new.Generation++
	objRaw, err := json.Marshal(new)
	if err != nil {
		return nil, err
	}
	oldRaw, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  "0d4f6a39-6c5e-4f0a-b0a4-2a1f9c4e7d10",
			Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Name: new.Name, Namespace: ns, Operation: admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kamaji-system:kamaji-controller-manager", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
			Object:   runtime.RawExtension{Raw: objRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}, DryRun: ptr.To(false),
		},
	})
}
