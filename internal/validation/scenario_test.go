package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// scenario is a Scenario document with spec, as JSON.
func scenario(t *testing.T, apiVersion, spec string) []byte {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte("apiVersion: " + apiVersion + "\nkind: Scenario\nmetadata: {name: s}\nspec:\n" + spec))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

const steps = `  nodes: [{prefix: node, count: 2}]
  timeline:
  - at: 1s
    apply:
      workload: {kind: Deployment, namespace: a, name: d}
      template: {metadata: {labels: {app: d}}, spec: {containers: [{name: c, image: i}]}}
  - at: 2s
    drain: {nodes: [node-0]}
`

func TestDecodeScenario(t *testing.T) {
	for name, tc := range map[string]struct {
		apiVersion, spec string
		want             []fieldError
	}{
		"valid":                          {"scenario.holdfast.dev/v1alpha1", steps, nil},
		"the apiVersion of old files":    {"holdfast.dev/v1alpha1", steps, nil},
		"expectations":                   {"scenario.holdfast.dev/v1alpha1", steps + "  expect: {maxUnavailable: 1, minReady: 2, maxTemplatesWithLivePods: 2, maxRevisions: 3, minEvictionGap: 20s, convergedWithin: 1m, drained: true, workloads: [{workload: {kind: Deployment, namespace: a, name: d}, minReady: 1}]}\n", nil},
		"another apiVersion":             {"holdfast.dev/v1", steps, []fieldError{{field.ErrorTypeNotSupported, "apiVersion"}}},
		"unknown field":                  {"scenario.holdfast.dev/v1alpha1", steps + "  speed: 2\n", []fieldError{{field.ErrorTypeForbidden, "spec.speed"}}},
		"misspelt field in a step":       {"scenario.holdfast.dev/v1alpha1", steps + "  - at: 3s\n    cordon: {nodes: [node-1], node: x}\n", []fieldError{{field.ErrorTypeForbidden, "spec.timeline[2].cordon.node"}}},
		"misspelt expectation":           {"scenario.holdfast.dev/v1alpha1", steps + "  expect: {maxUnavailble: 1}\n", []fieldError{{field.ErrorTypeForbidden, "spec.expect.maxUnavailble"}}},
		"misspelt workload expectation":  {"scenario.holdfast.dev/v1alpha1", steps + "  expect: {workloads: [{workload: {kind: Deployment, namespace: a, name: d}, minRedy: 1}]}\n", []fieldError{{field.ErrorTypeForbidden, "spec.expect.workloads[0].minRedy"}}},
		"a value of the wrong type":      {"scenario.holdfast.dev/v1alpha1", "  nodes: [{prefix: node, count: two}]\n  timeline: []\n", []fieldError{{field.ErrorTypeInvalid, "spec.nodes[0].count"}}},
		"a duration that does not parse": {"scenario.holdfast.dev/v1alpha1", "  until: soon\n  timeline: []\n", []fieldError{{field.ErrorTypeInvalid, "spec.until"}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := DecodeScenario(scenario(t, tc.apiVersion, tc.spec))
			if diff := cmp.Diff(tc.want, fieldErrors(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, errs)
			}
		})
	}
}

// JSON keeps a field given twice for the decoder to find (YAML documents are converted
// to JSON on reading, which keeps the last).
func TestDecodeScenarioDuplicateField(t *testing.T) {
	raw := []byte(`{"apiVersion": "scenario.holdfast.dev/v1alpha1", "kind": "Scenario", "spec": {"until": "1m", "until": "2m", "timeline": []}}`)
	_, errs := DecodeScenario(raw)
	if diff := cmp.Diff([]fieldError{{field.ErrorTypeDuplicate, "spec.until"}}, fieldErrors(errs)); diff != "" {
		t.Errorf("errors (-want +got):\n%s\n%v", diff, errs)
	}
}

func TestValidateScenario(t *testing.T) {
	for name, tc := range map[string]struct {
		spec string
		want []fieldError
	}{
		"two operations": {"  nodes: [{prefix: w, count: 1}]\n  timeline: [{at: 1s, cordon: {nodes: [w-0]}, uncordon: {nodes: [w-0]}}]\n",
			[]fieldError{{field.ErrorTypeInvalid, "spec.timeline[0]"}}},
		"no operation": {"  timeline: [{at: 1s}]\n", []fieldError{{field.ErrorTypeInvalid, "spec.timeline[0]"}}},
		"out of order": {"  timeline: [{at: 2s, cordon: {nodes: [w-0]}}, {at: 1s, cordon: {nodes: [w-0]}}]\n",
			[]fieldError{{field.ErrorTypeInvalid, "spec.timeline[1].at"}}},
		"a bad apply": {"  timeline: [{at: 1s, apply: {workload: {kind: Job}, replicas: -1, backoff: {initial: 2s, max: 1s}, template: {spec: {}}}}]\n",
			[]fieldError{
				{field.ErrorTypeNotSupported, "spec.timeline[0].apply.workload.kind"},
				{field.ErrorTypeRequired, "spec.timeline[0].apply.workload.namespace"},
				{field.ErrorTypeRequired, "spec.timeline[0].apply.workload.name"},
				{field.ErrorTypeInvalid, "spec.timeline[0].apply.backoff"},
				{field.ErrorTypeInvalid, "spec.timeline[0].apply.replicas"},
				{field.ErrorTypeRequired, "spec.timeline[0].apply.template.spec.containers"},
				{field.ErrorTypeRequired, "spec.timeline[0].apply.template.metadata.labels"},
			}},
		"empty apply": {"  timeline: [{at: 1s, apply: {workload: {kind: Deployment, namespace: a, name: b}}}]\n",
			[]fieldError{{field.ErrorTypeRequired, "spec.timeline[0].apply"}}},
		"daemonset replicas": {"  timeline: [{at: 1s, apply: {workload: {kind: DaemonSet, namespace: a, name: b}, replicas: 2}}]\n",
			[]fieldError{{field.ErrorTypeForbidden, "spec.timeline[0].apply.replicas"}}},
		"a bad drain": {"  timeline: [{at: 1s, drain: {nodes: [], retryAfter: 0s, clientRetries: -1}}]\n",
			[]fieldError{
				{field.ErrorTypeRequired, "spec.timeline[0].drain.nodes"},
				{field.ErrorTypeInvalid, "spec.timeline[0].drain.retryAfter"},
				{field.ErrorTypeInvalid, "spec.timeline[0].drain.clientRetries"},
			}},
		"negative durations": {"  podStartup: -1s\n  podTermination: -1s\n  timeline: [{at: -1s, cordon: {nodes: [w-0]}}]\n",
			[]fieldError{
				{field.ErrorTypeInvalid, "spec.podStartup"},
				{field.ErrorTypeInvalid, "spec.podTermination"},
				{field.ErrorTypeInvalid, "spec.timeline[0].at"},
			}},
		"until before a step":            {"  until: 1m\n  timeline: [{at: 2m, cordon: {nodes: [w-0]}}]\n", []fieldError{{field.ErrorTypeInvalid, "spec.until"}}},
		"a step after the default until": {"  timeline: [{at: 31m, cordon: {nodes: [w-0]}}]\n", []fieldError{{field.ErrorTypeRequired, "spec.until"}}},
		"node groups": {"  nodes: [{prefix: '', count: 1}, {prefix: w, count: 0}, {prefix: w, count: 1}]\n  timeline: []\n",
			[]fieldError{
				{field.ErrorTypeRequired, "spec.nodes[0].prefix"},
				{field.ErrorTypeInvalid, "spec.nodes[1].count"},
				{field.ErrorTypeDuplicate, "spec.nodes[2].prefix"},
			}},
		"expectations with nothing to measure": {"  timeline: []\n  expect: {drained: true, convergedWithin: 1m}\n",
			[]fieldError{
				{field.ErrorTypeInvalid, "spec.expect.drained"},
				{field.ErrorTypeInvalid, "spec.expect.convergedWithin"},
			}},
		"negative limits": {steps + "  expect: {maxUnavailable: -1, minReady: -1, maxTemplatesWithLivePods: -1, maxRevisions: -1, minEvictionGap: -1s, convergedWithin: -1s}\n",
			[]fieldError{
				{field.ErrorTypeInvalid, "spec.expect.maxTemplatesWithLivePods"},
				{field.ErrorTypeInvalid, "spec.expect.maxRevisions"},
				{field.ErrorTypeInvalid, "spec.expect.maxUnavailable"},
				{field.ErrorTypeInvalid, "spec.expect.minReady"},
				{field.ErrorTypeInvalid, "spec.expect.minEvictionGap"},
				{field.ErrorTypeInvalid, "spec.expect.convergedWithin"},
			}},
		"workload expectations": {steps + `  expect:
    workloads:
    - {workload: {kind: Deployment, namespace: a, name: d}, minReady: 1}
    - {workload: {kind: Deployment, namespace: a, name: d}, minReady: 2}
    - {workload: {kind: Deployment, namespace: a, name: e}}
    - {workload: {kind: StatefulSet, namespace: a, name: s}, convergedWithin: 1m}
`,
			[]fieldError{
				{field.ErrorTypeDuplicate, "spec.expect.workloads[1].workload"},
				{field.ErrorTypeRequired, "spec.expect.workloads[2]"},
				{field.ErrorTypeInvalid, "spec.expect.workloads[3].convergedWithin"},
			}},
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := DecodeScenario(scenario(t, "scenario.holdfast.dev/v1alpha1", tc.spec))
			if diff := cmp.Diff(tc.want, fieldErrors(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, errs)
			}
		})
	}
}
