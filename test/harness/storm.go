package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

const (
	// StormReplicas is the tenant kube-apiserver's replica count in the storm.
	StormReplicas = 3
	// The operator's desired generation advances every stormStep, as in the field.
	stormStep = 1500 * time.Millisecond
)

// KamajiTemplate is the tenant kube-apiserver pod template of generation gen (1–4), as the
// hosted-control-plane operator in the field wrote it:
// GEN2 adds the konnectivity-server sidecar, its three volumes and kube-apiserver's
// --egress-selector-config-file flag; GEN3 drops the flag again and moves the kine-uds
// mount to the end of the list; GEN4 puts the flag back, the mount staying last.
func KamajiTemplate(gen int) corev1.PodTemplateSpec {
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
				fmt.Sprintf("--server-count=%d", StormReplicas)},
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

// StormResult is what one run of the storm measured.
type StormResult struct {
	// Revisions counts the Deployment's ReplicaSets, PeakWithPods the most of them with
	// pods at once; PeakPods its most non-terminating pods at once, PeakAll counting
	// terminating pods too, as the field report did.
	Revisions, PeakWithPods, PeakPods, PeakAll int
	// Converged is GEN4 fully rolled out before the deadline.
	Converged bool
	// Refusals counts updates the API server refused as forbidden.
	Refusals int
}

// RunStorm creates the GEN1 kube-apiserver Deployment in ns and runs an operator-like loop
// that always applies the generation desired at that moment and, when refused, requeues
// with backoff, while a watcher counts the Deployment's ReplicaSets and its pods. logf
// reports each applied generation.
func RunStorm(ctx context.Context, c client.Client, ns string, logf func(format string, args ...any)) (StormResult, error) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-apiserver", Labels: map[string]string{"app": "kube-apiserver"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](StormReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kube-apiserver"}},
			Template: KamajiTemplate(1),
		},
	}
	start := time.Now()
	if err := c.Create(ctx, d); err != nil {
		return StormResult{}, fmt.Errorf("creating GEN1: %w", err)
	}

	var res StormResult
	var mu sync.Mutex
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		sets := map[string]bool{}
		for watchCtx.Err() == nil {
			var rsl appsv1.ReplicaSetList
			var pods corev1.PodList
			if c.List(watchCtx, &rsl, client.InNamespace(ns)) == nil && c.List(watchCtx, &pods, client.InNamespace(ns)) == nil {
				withPods := 0
				for _, rs := range rsl.Items {
					if workload.ControlledBy(rs.OwnerReferences, d.UID) {
						sets[rs.Name] = true
						if rs.Status.Replicas > 0 {
							withPods++
						}
					}
				}
				live := 0
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						live++
					}
				}
				mu.Lock()
				res.Revisions, res.PeakPods = len(sets), max(res.PeakPods, live)
				res.PeakWithPods = max(res.PeakWithPods, withPods)
				res.PeakAll = max(res.PeakAll, len(pods.Items))
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	stop := func() {
		// Let the watcher see the end state before stopping it.
		time.Sleep(time.Second)
		stopWatch()
		wg.Wait()
	}

	backoff := 200 * time.Millisecond
	deadline := start.Add(2 * time.Minute)
	for time.Now().Before(deadline) && !res.Converged {
		gen := min(4, 1+int(time.Since(start)/stormStep))
		want := KamajiTemplate(gen)
		cur := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			stop()
			return res, err
		}
		if !equality.Semantic.DeepDerivative(want, cur.Spec.Template) {
			cur.Spec.Template = want
			err := c.Update(ctx, cur)
			switch {
			case err == nil:
				logf("%5.1fs applied GEN%d", time.Since(start).Seconds(), gen)
				backoff = 200 * time.Millisecond
			case apierrors.IsConflict(err):
				continue
			case apierrors.IsForbidden(err):
				res.Refusals++
				time.Sleep(backoff)
				backoff = min(2*backoff, 2*time.Second)
				continue
			default:
				stop()
				return res, fmt.Errorf("applying GEN%d: %w", gen, err)
			}
		} else if gen == 4 && rolledOut(cur) {
			res.Converged = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return res, nil
}

func rolledOut(d *appsv1.Deployment) bool {
	s := d.Status
	n := ptr.Deref(d.Spec.Replicas, 1)
	return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == n && s.AvailableReplicas == n && s.Replicas == n
}
