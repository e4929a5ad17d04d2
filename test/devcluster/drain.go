package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

const (
	agentPolicy = "config/samples/disruptionpolicy_konnectivity_agent.yaml"
	agents      = 4
)

// agentDrain plays a node upgrade that drains every konnectivity-agent node at once, under
// the sample DisruptionPolicy: one agent at a time, each replacement Ready for 10 s, 20 s apart.
func (e *env) agentDrain(ctx context.Context, r *report) error {
	step("Scenario: a node upgrade drains the four konnectivity-agent nodes at once (this takes about a minute)")
	cs, err := kubernetes.NewForConfig(e.config)
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := e.client.List(ctx, &nodes); err != nil {
		return err
	}
	var all []string
	for _, n := range nodes.Items {
		all = append(all, n.Name)
	}
	if len(all) < 2*agents {
		return fmt.Errorf("the agent drain needs %d nodes, the cluster has %d", 2*agents, len(all))
	}
	// An earlier demo may have left nodes cordoned.
	if err := harness.Cordon(ctx, cs, all, false); err != nil {
		return err
	}
	if err := e.applyPolicy(ctx, agentPolicy); err != nil {
		return err
	}

	d := utiltesting.MakeDeployment("kube-system", "konnectivity-agent").Replicas(agents).Obj()
	d.TypeMeta = metav1.TypeMeta{}
	d.Labels["k8s-app"] = "konnectivity-agent"
	d.Spec.Template.Labels["k8s-app"] = "konnectivity-agent"
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "konnectivity-agent"}}}}}}
	if err := recreate(ctx, e.client, d); err != nil {
		return err
	}
	agentNodes, err := readyPods(ctx, e.client, d, agents)
	if err != nil {
		return err
	}
	r.note(fmt.Sprintf("konnectivity-agent: %d pods Ready, one per node", agents))

	start := time.Now()
	w := harness.WatchGroup(ctx, e.client, "kube-system", "konnectivity-agent", agents)
	drained, errs := harness.DrainAll(ctx, cs, agentNodes)
	if _, err := readyPods(ctx, e.client, d, agents); err != nil {
		return err
	}
	res := w.Stop()
	if err := harness.Cordon(ctx, cs, agentNodes, false); err != nil {
		return err
	}
	for _, err := range errs {
		r.note("drain error: " + err.Error())
	}
	ok := drained == agents && res.MaxUnavailable <= 1 && res.MinGapSeconds >= 20
	r.check(ok, fmt.Sprintf("kubectl drain of %d nodes at once: %d/%d drained in %s; never more than %d agent unavailable; evictions at least %ds apart (holdfast deferred the rest with 429s, which drain retries)",
		len(agentNodes), drained, len(agentNodes), time.Since(start).Round(time.Second), res.MaxUnavailable, res.MinGapSeconds))
	return nil
}

// recreate deletes what an earlier demo left of the Deployment, waits until its pods are
// gone, and creates it anew.
func recreate(ctx context.Context, c client.Client, d *appsv1.Deployment) error {
	_ = c.Delete(ctx, d.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationForeground))
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := c.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels{"app": d.Name})
		return err == nil && len(pods.Items) == 0 && apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(d), d.DeepCopy())), nil
	})
	if err != nil {
		return fmt.Errorf("removing the %s of an earlier demo: %w", d.Name, err)
	}
	return c.Create(ctx, d)
}

// readyPods waits until n pods of the Deployment (labelled app=<name>) are Ready and none
// terminates, and returns their nodes.
func readyPods(ctx context.Context, c client.Client, d *appsv1.Deployment, n int) ([]string, error) {
	pods, err := harness.ReadyPods(ctx, c, d.Namespace, d.Name, n)
	if err != nil {
		return nil, err
	}
	nodes := make([]string, 0, len(pods))
	for _, p := range pods {
		nodes = append(nodes, p.Spec.NodeName)
	}
	return nodes, nil
}
