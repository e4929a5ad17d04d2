package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

const kiamPolicy = "config/samples/disruptionpolicy_kiam.yaml"

// kiamSwap plays a blue/green node-group swap under three kiam-server replicas: three new
// nodes join, the three old ones are drained at once. Agents must never see fewer than
// two ready servers.
func (e *env) kiamSwap(ctx context.Context, r *report) error {
	step("Scenario: a node-group swap under kiam-server (3 replicas on 3 old nodes, 3 new nodes join, the old ones drain at once)")
	cs, err := kubernetes.NewForConfig(e.config)
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := e.client.List(ctx, &nodes); err != nil {
		return err
	}
	var old, others []string
	for i, n := range nodes.Items {
		if i < 3 {
			old = append(old, n.Name)
		} else {
			others = append(others, n.Name)
		}
	}
	if err := e.applyPolicy(ctx, kiamPolicy); err != nil {
		return err
	}
	// Only the old group exists when the servers start.
	if err := harness.Cordon(ctx, cs, others, true); err != nil {
		return err
	}
	defer func() { _ = harness.Cordon(context.Background(), cs, append(old, others...), false) }()

	d := utiltesting.MakeDeployment("kube-system", "kiam-server").Replicas(3).Obj()
	d.TypeMeta = metav1.TypeMeta{}
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kiam-server"}}}}}}
	if err := recreate(ctx, e.client, d); err != nil {
		return err
	}
	if _, err := readyPods(ctx, e.client, d, 3); err != nil {
		return err
	}
	r.note("kiam-server: 3 pods Ready on the old nodes")

	// The new group joins; the old one is drained at once.
	if err := harness.Cordon(ctx, cs, others[:3], false); err != nil {
		return err
	}
	start := time.Now()
	w := harness.WatchGroup(ctx, e.client, "kube-system", "kiam-server", 3)
	drained, errs := harness.DrainAll(ctx, cs, old)
	if _, err := readyPods(ctx, e.client, d, 3); err != nil {
		return err
	}
	res := w.Stop()
	for _, err := range errs {
		r.note("drain error: " + err.Error())
	}
	r.check(drained == len(old) && res.MinReady >= 2, fmt.Sprintf(
		"drain of the 3 old nodes at once: %d/%d drained in %s; never fewer than %d ready servers",
		drained, len(old), time.Since(start).Round(time.Second), res.MinReady))
	return nil
}
