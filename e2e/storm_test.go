//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	utiltesting "github.com/holdfast-dev/holdfast/internal/testing"
)

const (
	stormReplicas = 3
	// The operator's desired generation advances every stormStep, as in the field.
	stormStep = 1500 * time.Millisecond
)

// kamajiTemplate is the tenant kube-apiserver pod template of generation gen (1–4), as the
// hosted-control-plane operator in the field wrote it:
// GEN2 adds the konnectivity-server sidecar, its three volumes and kube-apiserver's
// --egress-selector-config-file flag; GEN3 drops the flag again and moves the kine-uds
// mount to the end of the list; GEN4 puts the flag back, the mount staying last.
func kamajiTemplate(gen int) corev1.PodTemplateSpec {
	args := []string{"--etcd-servers=unix:///run/kine/kine.sock", "--secure-port=6443"}
	mounts := []corev1.VolumeMount{{Name: "kine-uds", MountPath: "/run/kine"}, {Name: "pki", MountPath: "/etc/kubernetes/pki"}}
	volumes := []corev1.Volume{emptyDir("kine-uds"), emptyDir("pki")}
	containers := []corev1.Container{}
	if gen >= 2 {
		if gen != 3 {
			args = append(args, "--egress-selector-config-file=/etc/kubernetes/egress/egress-selector-configuration.yaml")
		}
		mounts = append(mounts, corev1.VolumeMount{Name: "egress-selector-config", MountPath: "/etc/kubernetes/egress"},
			corev1.VolumeMount{Name: "konnectivity-uds", MountPath: "/run/konnectivity"})
		if gen >= 3 {
			mounts = append(mounts[1:], mounts[0])
		}
		volumes = append(volumes, emptyDir("egress-selector-config"), emptyDir("konnectivity-uds"), emptyDir("konnectivity-certs"))
		containers = append(containers, corev1.Container{
			Name: "konnectivity-server", Image: "registry.k8s.io/kas-network-proxy/proxy-server:v0.31.0",
			Args: []string{"--mode=grpc", "--uds-name=/run/konnectivity/konnectivity-server.sock",
				fmt.Sprintf("--server-count=%d", stormReplicas)},
			VolumeMounts: []corev1.VolumeMount{{Name: "konnectivity-uds", MountPath: "/run/konnectivity"},
				{Name: "konnectivity-certs", MountPath: "/etc/konnectivity"}},
		})
	}
	apiserver := corev1.Container{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.37.2",
		Args: args, VolumeMounts: mounts}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "kube-apiserver"}},
		Spec:       corev1.PodSpec{Containers: append([]corev1.Container{apiserver}, containers...), Volumes: volumes},
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// stormResult is what one run of the storm measured.
type stormResult struct {
	revisions, peakPods int
	// peakAll counts terminating pods too, as the field report did.
	peakAll   int
	converged bool
	refusals  int
}

// runStorm creates the GEN1 Deployment and runs an operator-like loop that always applies
// the generation desired at that moment and, when refused, requeues with backoff, while a
// watcher counts the Deployment's ReplicaSets and its non-terminating pods.
func runStorm(ctx context.Context, t *testing.T, c client.Client, ns string) stormResult {
	d := utiltesting.MakeDeployment(ns, "kube-apiserver").Replicas(stormReplicas).Obj()
	d.TypeMeta = metav1.TypeMeta{}
	d.Spec.Template = kamajiTemplate(1)
	start := time.Now()
	if err := c.Create(ctx, d); err != nil {
		t.Fatalf("creating GEN1: %v", err)
	}

	var res stormResult
	var mu sync.Mutex
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		sets := map[string]bool{}
		for watchCtx.Err() == nil {
			var rsl appsv1.ReplicaSetList
			var pods corev1.PodList
			if c.List(watchCtx, &rsl, client.InNamespace(ns)) == nil && c.List(watchCtx, &pods, client.InNamespace(ns)) == nil {
				for _, rs := range rsl.Items {
					if history.ControlledBy(rs.OwnerReferences, d.UID) {
						sets[rs.Name] = true
					}
				}
				live := 0
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						live++
					}
				}
				mu.Lock()
				res.revisions, res.peakPods = len(sets), max(res.peakPods, live)
				res.peakAll = max(res.peakAll, len(pods.Items))
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	backoff := 200 * time.Millisecond
	deadline := start.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		gen := min(4, 1+int(time.Since(start)/stormStep))
		want := kamajiTemplate(gen)
		cur := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepDerivative(want, cur.Spec.Template) {
			cur.Spec.Template = want
			err := c.Update(ctx, cur)
			switch {
			case err == nil:
				t.Logf("%5.1fs applied GEN%d", time.Since(start).Seconds(), gen)
				backoff = 200 * time.Millisecond
			case apierrors.IsConflict(err):
				continue
			case apierrors.IsForbidden(err):
				res.refusals++
				time.Sleep(backoff)
				backoff = min(2*backoff, 2*time.Second)
				continue
			default:
				t.Fatalf("applying GEN%d: %v", gen, err)
			}
		} else if gen == 4 && rolledOut(cur) {
			res.converged = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Let the watcher see the end state before stopping it.
	time.Sleep(time.Second)
	stopWatch()
	wg.Wait()
	return res
}

func rolledOut(d *appsv1.Deployment) bool {
	s := d.Status
	n := ptr.Deref(d.Spec.Replicas, 1)
	return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == n && s.AvailableReplicas == n && s.Replicas == n
}

// TestKamajiStorm replays the field's operator storm with and without holdfast.
func TestKamajiStorm(t *testing.T) {
	f := features.New("kamaji storm").
		Assess("without holdfast every generation rolls out", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "storm-off")
			res := runStorm(ctx, t, c, ns)
			fmt.Printf("SCENARIO kamaji-storm guard=off revisions=%d peakPods=%d\n", res.revisions, res.peakPods)
			t.Logf("peak pods including terminating ones: %d", res.peakAll)
			if res.revisions != 4 {
				t.Errorf("revisions = %d, want 4: the unguarded storm is the baseline", res.revisions)
			}
			return ctx
		}).
		Assess("with holdfast the storm settles into at most two revisions", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "storm-on")
			p := utiltesting.MakeRolloutPolicy(ns).ArgMatchesReplicas("konnectivity-server", "--server-count").
				NamespaceSelector(map[string]string{corev1.LabelMetadataName: ns}).Obj()
			p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
			p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: 10 * time.Minute}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			waitEnforced(ctx, t, c, ns)
			res := runStorm(ctx, t, c, ns)
			fmt.Printf("SCENARIO kamaji-storm guard=on revisions=%d peakPods=%d converged=%t\n", res.revisions, res.peakPods, res.converged)
			t.Logf("holdfast refused %d updates; peak pods including terminating ones: %d", res.refusals, res.peakAll)
			maxSurge := 1 // 25% of 3, rounded up
			if res.revisions > 2 || res.peakPods > stormReplicas+maxSurge || !res.converged {
				t.Errorf("want at most 2 revisions, at most %d pods and convergence to GEN4; got %+v", stormReplicas+maxSurge, res)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

func newNamespace(ctx context.Context, t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName(prefix, 16)}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// waitEnforced waits until holdfast's cache has the namespace's policy: a dry-run create
// that breaks its --server-count rule is denied.
func waitEnforced(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	probe := utiltesting.MakeDeployment(ns, "probe").Replicas(2).Container("konnectivity-server", "--server-count=1").Obj()
	deadline := time.Now().Add(20 * time.Second)
	for !apierrors.IsForbidden(c.Create(ctx, probe.DeepCopy(), client.DryRunAll)) {
		if time.Now().After(deadline) {
			t.Fatalf("holdfast never enforced the policy in %s (log: %s)", ns, holdfastLog)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
