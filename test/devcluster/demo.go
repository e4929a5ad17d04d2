package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

const (
	tenantNamespace = "tenant-a"
	// The storm runs twice: in a namespace the sample policy selects, and in one it does not.
	stormNamespace     = "tenant-storm"
	unguardedNamespace = "tenant-unguarded"
	samplePolicy       = "config/samples/rolloutpolicy_hosted_control_plane.yaml"
)

// demo runs holdfast in the background and walks through what it guards, printing a
// report of each request and holdfast's answer.
func demo(ctx context.Context, side *os.File) error {
	e, err := prepare(ctx, side)
	if err != nil {
		return err
	}
	if err := e.installWebhooks(); err != nil {
		return err
	}
	step("Starting holdfast in the background")
	logPath, err := e.startBackground(ctx)
	if err != nil {
		return err
	}
	step("Applying the sample policy %s", samplePolicy)
	if err := e.applyPolicy(ctx, samplePolicy); err != nil {
		return err
	}
	for ns, guarded := range map[string]bool{tenantNamespace: true, stormNamespace: true, unguardedNamespace: false} {
		if err := e.freshTenant(ctx, ns, guarded); err != nil {
			return err
		}
	}

	if err := waitPolicyActive(ctx, e.client); err != nil {
		return err
	}

	r := &report{}
	if err := e.storm(ctx, r); err != nil {
		return err
	}
	step("Scenario: an operator drives a hosted control plane (3 kube-apiserver replicas with konnectivity-server)")
	d := utiltesting.MakeDeployment(tenantNamespace, "kube-apiserver").Replicas(3).
		Container("konnectivity-server", "--mode=grpc", "--server-count=3").Obj()
	d.TypeMeta = metav1.TypeMeta{}
	key := client.ObjectKeyFromObject(d)
	// update re-reads the Deployment, applies change and sends it, as an operator would.
	update := func(change func(*appsv1.Deployment)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := e.client.Get(ctx, key, d); err != nil {
				return err
			}
			c := d.DeepCopy()
			change(c)
			return e.client.Update(ctx, c)
		})
	}
	image := func(tag string) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:" + tag
		}
	}
	scale := func(n int32, serverCount bool) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To(n)
			if serverCount {
				d.Spec.Template.Spec.Containers[1].Args = []string{"--mode=grpc", fmt.Sprintf("--server-count=%d", n)}
			}
		}
	}

	r.expect("create kube-apiserver: 3 replicas, --server-count=3 (revision A)", e.client.Create(ctx, d), false)
	r.expect("change the image at once, while revision A still rolls out", update(image("B")), true)
	if err := waitReady(ctx, e.client, d, 3); err != nil {
		return err
	}
	r.note("revision A: 3 pods Ready")
	r.expect("scale to 5 replicas, --server-count left at 3", update(scale(5, false)), true)
	r.expect("scale to 5 replicas with --server-count=5 (a scale, not a new revision)", update(scale(5, true)), false)
	if err := waitReady(ctx, e.client, d, 5); err != nil {
		return err
	}
	r.note("5 pods Ready")
	r.expect("change the image now that the rollout is complete (revision B)", update(image("B")), false)
	if err := waitObserved(ctx, e.client, d); err != nil {
		return err
	}
	r.expect("roll back to A while B rolls out and A still serves", update(image("1")), false)
	if err := waitReady(ctx, e.client, d, 5); err != nil {
		return err
	}
	r.note("back on revision A: 5 pods Ready")
	r.expect("go to B again within the 10m revert window (flapping)", update(image("B")), true)

	if err := e.agentDrain(ctx, r); err != nil {
		return err
	}
	if err := e.kiamSwap(ctx, r); err != nil {
		return err
	}

	r.print()
	if r.surprises > 0 {
		return fmt.Errorf("%d answers were not what holdfast should give; see %s", r.surprises, logPath)
	}
	fmt.Printf(`
holdfast keeps running in the background against the local cluster:
  kubectl:      %s --kubeconfig %s
  holdfast log: %s
  readiness:    %s
  metrics:      curl -s http://127.0.0.1:%d/metrics | grep holdfast_
  demo log:     %[7]s (the test bed's, kwokctl's and the clients' output)
Try it:         %[1]s --kubeconfig %[2]s -n %[6]s patch deployment kube-apiserver -p '{"spec":{"replicas":4}}'
Stop it all:    make testbed-down
`, e.kubectl, e.kubeconfig, logPath, proc.ReadyURL(), proc.MetricsPort, tenantNamespace, side.Name())
	if os.Getenv("HOLDFAST_DEMO_TEARDOWN") != "" {
		step("Tearing down (HOLDFAST_DEMO_TEARDOWN is set)")
		stopBackground(e.cache)
		return e.runScript(ctx, "hack/testbed-down.sh")
	}
	return nil
}

// applyPolicy applies a sample policy of either kind with server-side apply, and waits
// until the API server sends what it guards to holdfast.
func (e *env) applyPolicy(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := e.client.Patch(ctx, u, client.Apply, client.FieldOwner("holdfast-demo"), client.ForceOwnership); err != nil {
		return err
	}
	obj, err := e.client.Scheme().New(u.GroupVersionKind())
	if err != nil {
		return err
	}
	p := obj.(client.Object)
	p.SetName(u.GetName())
	return harness.WaitIntercepted(ctx, e.client, p)
}

// waitPolicyActive waits until holdfast's cache has the sample policy: a dry-run create
// that breaks it is denied.
func waitPolicyActive(ctx context.Context, c client.Client) error {
	probe := utiltesting.MakeDeployment(tenantNamespace, "policy-probe").Label("app", "kube-apiserver").Replicas(2).
		Container("konnectivity-server", "--server-count=1").Obj()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(c.Create(ctx, probe.DeepCopy(), client.DryRunAll)), nil
	})
	if err != nil {
		return fmt.Errorf("holdfast did not start enforcing the sample policy: %w", err)
	}
	return nil
}

// freshTenant applies a tenant namespace, labelled for the sample policy when guarded,
// and removes the kube-apiserver Deployment and pods a previous demo left in it.
func (e *env) freshTenant(ctx context.Context, name string, guarded bool) error {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"holdfast.dev/hosted-control-plane": fmt.Sprint(guarded)}}}
	if err := e.client.Patch(ctx, ns, client.Apply, client.FieldOwner("holdfast-demo"), client.ForceOwnership); err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: name, Name: "kube-apiserver"}
	_ = e.client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.client.List(ctx, &pods, client.InNamespace(name)); err != nil {
			return false, err
		}
		err := e.client.Get(ctx, key, &appsv1.Deployment{})
		return apierrors.IsNotFound(err) && len(pods.Items) == 0, nil
	})
}

// waitObserved waits until the Deployment controller has acted on the latest generation,
// so that the new revision's ReplicaSet exists.
func waitObserved(ctx context.Context, c client.Client, d *appsv1.Deployment) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation, nil
	})
}

func waitReady(ctx context.Context, c client.Client, d *appsv1.Deployment, n int32) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
			return false, err
		}
		s := got.Status
		// Complete as an operator sees it: no pod of an earlier template left, terminating
		// ones included (holdfast counts them as live, docs/invariants.md I7).
		return got.Generation == s.ObservedGeneration && s.UpdatedReplicas == n && s.ReadyReplicas == n && s.Replicas == n &&
			ptr.Deref(s.TerminatingReplicas, 0) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d Ready replicas of %s: %w", n, d.Name, err)
	}
	time.Sleep(time.Second) // holdfast's cache has it too
	return nil
}

// report collects what the demo asked and what holdfast answered.
type report struct {
	lines     []string
	surprises int
}

// expect records a request's answer and whether holdfast should have denied it.
func (r *report) expect(what string, err error, wantDenied bool) {
	denied := apierrors.IsForbidden(err) && strings.Contains(err.Error(), "holdfast.dev")
	switch {
	case err == nil:
		r.lines = append(r.lines, fmt.Sprintf("  ADMITTED  %s", what))
	case denied:
		r.lines = append(r.lines, fmt.Sprintf("  DENIED    %s\n            %s", what, err))
	default:
		r.lines = append(r.lines, fmt.Sprintf("  ERROR     %s: %v", what, err))
	}
	if denied != wantDenied || (err != nil && !denied) {
		r.surprises++
		r.lines[len(r.lines)-1] += "   <-- unexpected"
	}
}

// check records an outcome the demo measured, and whether it is what holdfast promises.
func (r *report) check(ok bool, s string) {
	mark := "  HELD      "
	if !ok {
		mark = "  BROKEN    "
		r.surprises++
	}
	r.lines = append(r.lines, mark+s)
}

func (r *report) note(s string) {
	r.lines = append(r.lines, "            "+s)
}

func (r *report) print() {
	fmt.Println("\nholdfast demo report")
	fmt.Println("====================")
	for _, l := range r.lines {
		fmt.Println(l)
	}
}
