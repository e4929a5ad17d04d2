package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// memory restarts the replica, fills the cluster with o.workloads Deployments, a
// ReplicaSet each, and o.pods pods spread over them, then reads the replica's resident
// memory once its caches have had time to take them in.
func (b *bench) memory(ctx context.Context, o options) error {
	const namespaces = 20
	for i := range namespaces {
		if err := namespace(ctx, b.c, fmt.Sprintf("memory-%02d", i), nil); err != nil {
			return err
		}
	}
	// A fresh replica: its memory is its caches, not what earlier measurements left.
	if err := b.restart(ctx); err != nil {
		return err
	}
	before, err := rss(b.cmd.Process.Pid)
	if err != nil {
		return err
	}
	start := time.Now()
	perWorkload := o.pods / o.workloads
	err = parallel(ctx, 4*runtime.NumCPU(), o.workloads, func(ctx context.Context, i int) error {
		ns := fmt.Sprintf("memory-%02d", i%namespaces)
		d := utiltesting.MakeDeployment(ns, fmt.Sprintf("app-%04d", i)).Replicas(int32(perWorkload)).
			Container("sidecar", "--listen=:8080", "--upstream=http://127.0.0.1:9090", "--log-level=info").Obj()
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west-1"}}
		if err := b.c.Create(ctx, d); err != nil {
			return err
		}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name + "-5d8f7b9c4",
			Labels:          map[string]string{"app": d.Name, appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7b9c4"},
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: *d.Spec.Template.DeepCopy()}}
		rs.Spec.Template.Labels = map[string]string{"app": d.Name, appsv1.DefaultDeploymentUniqueLabelKey: "5d8f7b9c4"}
		if err := b.c.Create(ctx, rs); err != nil {
			return err
		}
		for j := range perWorkload {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", rs.Name, j),
				Labels:          rs.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
				Spec: *rs.Spec.Template.Spec.DeepCopy()}
			p.Spec.NodeName = fmt.Sprintf("node-%03d", (i+j)%200)
			if err := b.c.Create(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: created %d Deployments, %d ReplicaSets and %d pods in %s\n",
		o.workloads, o.workloads, o.workloads*perWorkload, time.Since(start).Round(time.Second))
	// The watches deliver within seconds; give the replica time to settle and collect garbage.
	time.Sleep(30 * time.Second)
	after, err := rss(b.cmd.Process.Pid)
	if err != nil {
		return err
	}
	peak, err := procStatus(b.cmd.Process.Pid, "VmHWM")
	if err != nil {
		return err
	}
	report("memory-pods", float64(o.workloads*perWorkload), "pods")
	report("memory-workloads", float64(o.workloads), "workloads")
	report("memory-rss-empty", before, "MiB")
	report("memory-rss", after, "MiB")
	report("memory-rss-peak", peak, "MiB")
	return nil
}

// parallel runs do(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(ctx context.Context, workers, n int, do func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

func rss(pid int) (float64, error) { return procStatus(pid, "VmRSS") }

// procStatus reads a kB field of /proc/<pid>/status, in MiB.
func procStatus(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
