package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
)

// execute runs the holdfast command line with args and a fake server, and returns what it
// printed, the options the server was started with (nil when it was not) and the error.
func execute(t *testing.T, args ...string) (stdout, stderr string, served *options, err error) {
	t.Helper()
	root := newRootCommand(func(_ context.Context, o *options) error {
		served = o
		return nil
	})
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), served, err
}

// serverFlags names every flag of the server, as options.bind defines them.
func serverFlags() []string {
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	defaultOptions().bind(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

func TestNoArgumentsPrintsHelp(t *testing.T) {
	out, errOut, served, err := execute(t)
	if err != nil || served != nil {
		t.Fatalf("holdfast: err %v, served %t; want help and exit 0", err, served != nil)
	}
	for _, cmd := range []string{"serve", "check", "simulate", "selftest", "version"} {
		if !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("help does not list %s:\n%s", cmd, out)
		}
	}
	// The root keeps the server flags only for old manifests; its help does not offer them.
	if strings.Contains(out, "--leader-elect") || errOut != "" {
		t.Errorf("help lists server flags or warns:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

func TestServeHelpListsServerFlags(t *testing.T) {
	out, _, served, err := execute(t, "serve", "--help")
	if err != nil || served != nil {
		t.Fatalf("serve --help: err %v, served %t", err, served != nil)
	}
	for _, name := range serverFlags() {
		if !strings.Contains(out, "--"+name+" ") && !strings.Contains(out, "--"+name+"=") {
			t.Errorf("serve --help does not list --%s:\n%s", name, out)
		}
	}
}

func TestServeRunsTheServerWithItsFlags(t *testing.T) {
	_, errOut, served, err := execute(t, "serve", "--namespace=guard", "--leader-elect=false")
	if err != nil || served == nil {
		t.Fatalf("serve: err %v, served %t", err, served != nil)
	}
	if served.namespace != "guard" || served.leaderElect || served.webhookPort != defaultOptions().webhookPort {
		t.Errorf("served with namespace %q, leaderElect %t, webhookPort %d", served.namespace, served.leaderElect, served.webhookPort)
	}
	if errOut != "" {
		t.Errorf("serve warned: %s", errOut)
	}
}

// TestRootWithServerFlagsStillServes: manifests written before `serve` existed start the
// image with server flags only; they must keep serving, with a warning.
func TestRootWithServerFlagsStillServes(t *testing.T) {
	_, errOut, served, err := execute(t, "--namespace=guard", "--leader-elect", "--cert-dir=/certs")
	if err != nil || served == nil {
		t.Fatalf("holdfast with server flags: err %v, served %t", err, served != nil)
	}
	if served.namespace != "guard" || !served.leaderElect || served.certDir != "/certs" {
		t.Errorf("served with namespace %q, leaderElect %t, certDir %q", served.namespace, served.leaderElect, served.certDir)
	}
	if !strings.Contains(errOut, deprecatedRootServe) {
		t.Errorf("stderr %q, want the deprecation warning", errOut)
	}
	// Every server flag the old manifests could pass is still accepted by the root.
	root := newRootCommand(nil)
	for _, name := range serverFlags() {
		if root.Flags().Lookup(name) == nil {
			t.Errorf("root no longer accepts --%s", name)
		}
	}
}

func TestOfflineCommandsDoNotServe(t *testing.T) {
	out, _, served, err := execute(t, "check",
		"-p", "../../config/samples/rolloutpolicy_konnectivity_server_count.yaml", "-f", "check/testdata/kube-apiserver-old.yaml")
	if err != nil || served != nil || !strings.Contains(out, "CREATE Deployment tenant-a/kube-apiserver: allow") {
		t.Errorf("check: err %v, served %t, output:\n%s", err, served != nil, out)
	}

	_, _, served, err = execute(t, "simulate", "-f", "nope.yaml")
	var ee *app.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || served != nil {
		t.Errorf("simulate of a missing file: err %v, served %t; want simulate's exit code 2", err, served != nil)
	}

	out, _, served, err = execute(t, "version")
	if err != nil || served != nil || out == "" {
		t.Errorf("version: err %v, served %t, output %q", err, served != nil, out)
	}
}

// The namespace comes from the downward API (POD_NAMESPACE) unless --namespace says
// otherwise; without either it is holdfast-system.
func TestServeReadsItsNamespaceFromTheDownwardAPI(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"platform-guard", nil, "platform-guard"},
		{"platform-guard", []string{"--namespace=guard"}, "guard"},
		{"", nil, "holdfast-system"},
	} {
		t.Setenv(namespaceEnv, tc.env)
		_, _, served, err := execute(t, append([]string{"serve"}, tc.args...)...)
		if err != nil || served == nil {
			t.Fatalf("serve %v: err %v", tc.args, err)
		}
		if served.namespace != tc.want {
			t.Errorf("POD_NAMESPACE=%q, serve %v: namespace %q, want %q", tc.env, tc.args, served.namespace, tc.want)
		}
	}
}
