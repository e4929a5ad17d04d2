package review

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestRequestLogger holds RequestLogger to what controller-runtime's default logs with each
// message, and to the caller it reports: the line that logged, not the deferring sink.
func TestRequestLogger(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{LogCaller: funcr.All, Verbosity: 1})
	req := &admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "req-1", Namespace: "tenant-a", Name: "kube-apiserver",
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		UserInfo: authenticationv1.UserInfo{Username: "kamaji"}}}
	log := RequestLogger(base.WithName("admission"), req)

	log.Info("first", "k", "v")                  // the line logged from
	log.V(1).Error(errors.New("boom"), "second") // errors log at any verbosity
	log.WithValues("extra", 1).WithName("x").Info("third")
	log.V(2).Info("not shown")

	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3: %q", len(lines), lines)
	}
	for i, l := range lines {
		for _, want := range []string{`"requestID"="req-1"`, `"namespace"="tenant-a"`, `"name"="kube-apiserver"`, `"user"="kamaji"`,
			`"object"={"name"="kube-apiserver" "namespace"="tenant-a"}`, `"file"="log_test.go"`} {
			if !strings.Contains(l, want) {
				t.Errorf("line %d lacks %s: %s", i, want, l)
			}
		}
	}
	if !strings.Contains(lines[0], `"k"="v"`) || !strings.Contains(lines[1], `"error"="boom"`) ||
		!strings.Contains(lines[2], `"extra"=1`) || !strings.HasPrefix(lines[2], "admission/x") {
		t.Errorf("messages' own values or names lost: %q", lines)
	}
}
