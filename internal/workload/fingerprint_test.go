package workload

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// TestFingerprintsStoredForm pins the fingerprints of one pod template: the revision
// journals, the fleet ledgers and the group ledgers' rollout starts store them, and a
// replica of another release that fingerprints the same template otherwise would read
// every stored revision as another template. The template is the one of
// internal/journal's testdata/previous/ journal, whose current revision has this sum and
// shape. A ReplicaSet's copy (with kube's hash label) and the API server's JSON of the
// template have the same fingerprint.
func TestFingerprintsStoredForm(t *testing.T) {
	labels := map[string]string{"app": "kube-apiserver"}
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.32.0"},
			{Name: "konnectivity-server", Image: "registry.k8s.io/kas-network-proxy/proxy-server:v0.31.0", Args: []string{"--server-count=3"}},
		}},
	}
	replicaSets := tmpl.DeepCopy()
	replicaSets.Labels = map[string]string{"app": "kube-apiserver", appsv1.DefaultDeploymentUniqueLabelKey: "7c9d8f6b5"}
	raw, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range []struct {
		name string
		t    *Template
	}{
		{"the template", FromSpec(tmpl, "")},
		{"its ReplicaSet's copy", FromSpec(replicaSets, "")},
		{"its JSON", FromJSON(raw)},
	} {
		sum, ok := c.t.Sum()
		if !ok {
			t.Fatalf("%s: no fingerprint", c.name)
		}
		fmt.Fprintf(&b, "sum of %s\t%s\n", c.name, sum)
	}
	shape, err := FromSpec(tmpl, "").Shape([]v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "shape without konnectivity-server --server-count\t%s\n", shape)
	golden.Assert(t, "testdata/fingerprints.golden", []byte(b.String()))
}
