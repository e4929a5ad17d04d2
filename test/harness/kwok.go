package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kwok is a kwok cluster of the test bed's binaries, started with kwokctl: a real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler, and kwok's fake nodes
// with the pod stages of hack/testbed-config.sh (Ready 1–6 s after scheduling, lingering
// while terminating).
type Kwok struct {
	Name string
	// Kubeconfig is the path of the cluster's admin kubeconfig; Config is the same as a
	// rest.Config.
	Kubeconfig string
	Config     *rest.Config
	kwokctl    string
	env        []string
	log        io.Writer
}

// StartKwok creates the cluster name with nodes fake nodes from the kwokctl configuration
// at config, with the binaries in bin (kwokctl runs the kubectl it finds on PATH: this
// one). It writes the kubeconfig into dir and kwokctl's output to log.
func StartKwok(ctx context.Context, bin, config, name string, nodes int, dir string, log io.Writer) (*Kwok, error) {
	k := &Kwok{Name: name, kwokctl: filepath.Join(bin, "kwokctl"), log: log,
		env: append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))}
	if err := k.run(ctx, nil, "create", "cluster", "--name", name, "--config", config, "--wait", "2m"); err != nil {
		return nil, err
	}
	if err := k.run(ctx, nil, "scale", "node", "--name", name, "--replicas", strconv.Itoa(nodes)); err != nil {
		_ = k.Delete()
		return nil, err
	}
	var kc strings.Builder
	if err := k.run(ctx, &kc, "get", "kubeconfig", "--name", name); err != nil {
		_ = k.Delete()
		return nil, err
	}
	k.Kubeconfig = filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(k.Kubeconfig, []byte(kc.String()), 0o600); err != nil {
		_ = k.Delete()
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		_ = k.Delete()
		return nil, err
	}
	k.Config = cfg
	return k, nil
}

// Delete stops the cluster and removes what kwokctl kept of it.
func (k *Kwok) Delete() error {
	return k.run(context.Background(), nil, "delete", "cluster", "--name", k.Name)
}

func (k *Kwok) run(ctx context.Context, stdout io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, k.kwokctl, args...)
	cmd.Env, cmd.Stderr, cmd.Stdout = k.env, k.log, k.log
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
