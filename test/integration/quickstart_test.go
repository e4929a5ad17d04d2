//go:build integration

package integration

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// quickStartBlock is a shell block of docs/install.md marked `<!-- quickstart: <expect> -->`,
// with what running it must show: ok (exit 0, no warning), warning (exit 0 and holdfast's
// finding as a kubectl Warning), denied (a non-zero exit and holdfast's refusal).
type quickStartBlock struct {
	line   int
	expect string
	script string
}

func quickStartBlocks(t *testing.T, path string) []quickStartBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []quickStartBlock
	var cur *quickStartBlock
	expect := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += line + "\n"
		case strings.HasPrefix(line, "<!-- quickstart: "):
			expect = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- quickstart: "), " -->")
		case expect != "" && line == "```sh":
			cur = &quickStartBlock{line: n + 1, expect: expect}
			expect = ""
		case expect != "" && line != "":
			t.Fatalf("%s:%d: a quickstart marker must come right before a ```sh block", path, n)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestQuickStart runs the quick start's policy steps from docs/install.md as written, with
// the test bed's kubectl against the suite's API server, which calls holdfast's webhooks:
// the policy in Warn admits the change with a finding, in Enforce refuses it, and the
// edit that keeps the flag with the replicas goes through. The kind and image steps
// before them need a container runtime and are not run here.
func TestQuickStart(t *testing.T) {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("the test bed's kubectl: %v (make testbed builds it)", err)
	}
	blocks := quickStartBlocks(t, filepath.Join("..", "..", "docs", "install.md"))
	var expects []string
	for _, b := range blocks {
		expects = append(expects, b.expect)
	}
	if got, want := strings.Join(expects, ","), "ok,warning,ok,denied,ok"; got != want {
		t.Fatalf("docs/install.md's quickstart blocks expect %s, want %s: update the test with the doc", got, want)
	}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData, Token: restConfig.BearerToken}
	kc.Contexts["quickstart"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "quickstart"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanUpQuickStart(t) })

	for _, b := range blocks {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		text := string(out)
		t.Logf("docs/install.md:%d (%s):\n%s", b.line, b.expect, text)
		finding := strings.Contains(text, "/"+rollout.RuleArgsMatchReplicas+"]")
		switch b.expect {
		case "ok":
			if err != nil || strings.Contains(text, "Warning:") {
				t.Fatalf("docs/install.md:%d: want success without a warning, got %v", b.line, err)
			}
		case "warning":
			if err != nil || !strings.Contains(text, "Warning:") || !finding {
				t.Fatalf("docs/install.md:%d: want success with holdfast's %s warning, got %v", b.line, rollout.RuleArgsMatchReplicas, err)
			}
		case "denied":
			if err == nil || !strings.Contains(text, "denied the request") || !finding {
				t.Fatalf("docs/install.md:%d: want holdfast's %s refusal, got %v", b.line, rollout.RuleArgsMatchReplicas, err)
			}
		default:
			t.Fatalf("docs/install.md:%d: unknown expectation %q", b.line, b.expect)
		}
	}
}

// cleanUpQuickStart deletes what the quick start created, as its last lines tell the
// reader to. envtest runs no namespace controller, so the Deployment is deleted by name
// rather than left to the namespace's deletion.
func cleanUpQuickStart(t *testing.T) {
	ctx := context.Background()
	for _, obj := range []client.Object{
		&v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "server-count"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "kube-apiserver"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
	} {
		if err := k8s.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	}
}
