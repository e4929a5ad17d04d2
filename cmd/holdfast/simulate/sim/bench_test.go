package sim

import (
	"fmt"
	"strings"
	"testing"
)

// bigScenario is a cluster of pods pods: 100 worker nodes each running an agent DaemonSet
// pod, and Deployments of 100 pods for the rest, all under a DisruptionPolicy of two pods at a time and
// a RolloutPolicy that settles; the agent's template changes while five nodes are drained.
func bigScenario(pods int) string {
	const nodes, perDeployment = 100, 100
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: holdfast.dev/v1alpha1
kind: Scenario
metadata: {name: big}
spec:
  nodes: [{prefix: node, count: %d}]
  timeline:
  - at: 0s
    apply:
      workload: {kind: DaemonSet, namespace: fleet, name: agent}
      template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: agent, image: "agent:2"}]}}
  - at: 1s
    drain: {nodes: [node-0, node-1, node-2, node-3, node-4]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: fleet}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 10%%}}
  template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: agent, image: "agent:1"}]}}
---
apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: fleet}
spec:
  mode: Enforce
  targets: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: fleet}}}
  rules: {settle: {}}
---
apiVersion: holdfast.dev/v1alpha1
kind: DisruptionPolicy
metadata: {name: fleet}
spec:
  mode: Enforce
  targets: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: fleet}}}
  maxUnavailable: 2
`, nodes)
	for i := range (pods - nodes) / perDeployment {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-%[1]d, namespace: fleet}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: app-%[1]d}}
  template: {metadata: {labels: {app: app-%[1]d}}, spec: {containers: [{name: app, image: "app:1"}]}}
`, i, perDeployment)
	}
	return b.String()
}

// BenchmarkSimulate5000Pods is `holdfast simulate` on a 5,000-pod scenario, loading
// included (make bench reports it; the target is under 2 s).
func BenchmarkSimulate5000Pods(b *testing.B) {
	file := writeFile(b, bigScenario(5000))
	for b.Loop() {
		sc, err := Load([]string{file}, nil)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(sc)
		if err != nil || len(res.Errors) > 0 || res.TimedOut {
			b.Fatalf("%v %v timed out %t", err, res.Errors, res.TimedOut)
		}
	}
}
