//go:build integration

package integration

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/holdfast-dev/holdfast/internal/review"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// TestBadInputOverHTTPS sends what no API server sends straight at the webhook server
// over HTTPS, and holds each answer to the status documented in docs/operations.md: an
// AdmissionReview (HTTP 200) that refuses with the code and a message saying what is
// wrong, or, for a pod that is gone, an admission the API server turns into its own 404.
func TestBadInputOverHTTPS(t *testing.T) {
	ns := createNamespace(t, nil)
	deployment := func(replicas int32, serverCount string) string {
		raw, err := json.Marshal(konnectivity(ns, replicas, serverCount))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	reviewOf := func(kind, resource, sub, op, object, old string) string {
		return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"bad-1",`+
			`"kind":{"group":"apps","version":"v1","kind":%q},"resource":{"group":"apps","version":"v1","resource":%q},"subResource":%q,`+
			`"name":"kube-apiserver","namespace":%q,"operation":%q,"userInfo":{"username":"fuzz"},"object":%s,"oldObject":%s}}`,
			kind, resource, sub, ns, op, object, old)
	}
	good := deployment(3, "3")
	evictionOf := func(pod string) string {
		return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"bad-2",`+
			`"kind":{"group":"policy","version":"v1","kind":"Eviction"},"resource":{"version":"v1","resource":"pods"},"subResource":"eviction",`+
			`"name":%q,"namespace":%q,"operation":"CREATE","userInfo":{"username":"drain"},"object":{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%[1]q,"namespace":%[2]q}}}}`,
			pod, ns)
	}
	cases := []struct {
		name, path, method, contentType, body string
		allowed                               bool
		code                                  int32
		message                               string
	}{
		{"malformed JSON", rollout.Path, "POST", "application/json", `{"apiVersion":"admission.k8s.io/v1","request":{`, false, 400, "decoding the AdmissionReview"},
		{"wrong apiVersion", rollout.Path, "POST", "application/json", strings.Replace(reviewOf("Deployment", "deployments", "", "CREATE", good, "null"), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), false, 400, "apiVersion"},
		{"not an AdmissionReview", rollout.Path, "POST", "application/json", strings.Replace(reviewOf("Deployment", "deployments", "", "CREATE", good, "null"), `"AdmissionReview"`, `"Deployment"`, 1), false, 400, "AdmissionReview"},
		{"no request", rollout.Path, "POST", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, false, 400, "no request"},
		{"not JSON", rollout.Path, "POST", "application/yaml", "apiVersion: admission.k8s.io/v1", false, 400, "contentType"},
		{"GET", rollout.Path, "GET", "application/json", "", false, 405, "POST"},
		{"over the size cap", rollout.Path, "POST", "application/json", `{"pad":"` + strings.Repeat("x", review.MaxBodyBytes) + `"}`, false, 413, "too large"},
		{"UPDATE without oldObject", rollout.Path, "POST", "application/json", reviewOf("Deployment", "deployments", "", "UPDATE", deployment(3, "1"), "null"), false, 400, "without oldObject"},
		{"unknown kind", rollout.Path, "POST", "application/json", reviewOf("ReplicaSet", "replicasets", "", "CREATE", good, "null"), false, 400, "unsupported kind"},
		{"object of the wrong shape", rollout.Path, "POST", "application/json", reviewOf("Deployment", "deployments", "", "CREATE", `{"spec":{"replicas":"three"}}`, "null"), false, 400, "decoding"},
		{"object that is not an object", rollout.Path, "POST", "application/json", reviewOf("Deployment", "deployments", "", "CREATE", `[1,2]`, "null"), false, 400, ""},
		{"unknown subresource", rollout.Path, "POST", "application/json", reviewOf("Deployment", "deployments", "rollback", "UPDATE", good, good), false, 400, "unsupported subresource"},
		{"forbidden change", rollout.Path, "POST", "application/json", reviewOf("Deployment", "deployments", "", "UPDATE", deployment(3, "1"), good), false, 403, "--server-count"},
		{"allowed change", rollout.Path, "POST", "application/json", reviewOf("Deployment", "deployments", "", "UPDATE", deployment(5, "5"), good), true, 0, ""},
		{"eviction of a pod that is gone", eviction.Path, "POST", "application/json", evictionOf("gone"), true, 0, ""},
		{"eviction naming another pod", eviction.Path, "POST", "application/json", strings.Replace(evictionOf("a"), `"metadata":{"name":"a"`, `"metadata":{"name":"b"`, 1), false, 400, "names pod"},
		{"eviction without an object", eviction.Path, "POST", "application/json", strings.Replace(evictionOf("a"), `"object":{`, `"old":{`, 1), false, 400, "Eviction"},
		{"pod relabel of a Deployment", rollout.PodRelabelPath, "POST", "application/json", reviewOf("Deployment", "deployments", "", "UPDATE", good, good), false, 400, "unsupported kind"},
		{"pod relabel of a pod that is not an object", rollout.PodRelabelPath, "POST", "application/json",
			strings.NewReplacer(`"group":"apps",`, "", `"kind":"Deployment"`, `"kind":"Pod"`).Replace(reviewOf("Deployment", "deployments", "", "UPDATE", `[1,2]`, `{}`)), false, 400, "decoding the pod"},
	}
	applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}}} //nolint:gosec // the test server's self-signed certificate
	base := "https://" + net.JoinHostPort(webhookHost, strconv.Itoa(webhookPort))
	wrong := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, base+c.path, bytes.NewBufferString(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", c.contentType)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var ar admissionv1.AdmissionReview
			if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ar) != nil || ar.Response == nil {
				wrong++
				t.Fatalf("HTTP %d %q: want an AdmissionReview", resp.StatusCode, raw)
			}
			r := ar.Response
			var code int32
			var msg string
			if r.Result != nil {
				code, msg = r.Result.Code, r.Result.Message
			}
			if r.Allowed != c.allowed || (!c.allowed && (code != c.code || msg == "" || !strings.Contains(msg, c.message))) {
				wrong++
				t.Errorf("allowed=%t code=%d message=%q; want allowed=%t code=%d and a message with %q", r.Allowed, code, msg, c.allowed, c.code, c.message)
			}
		})
	}
	fmt.Printf("RELIABILITY bad-input-https cases=%d wrong=%d\n", len(cases), wrong)
}
