package check

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkCheck1000Changes20Policies is `holdfast check` on 1,000 workload changes (each
// given old and new, 2,000 documents in 10 files) against 20 RolloutPolicies, from reading
// the files to the JSON report: the figure CI pays per run.
func BenchmarkCheck1000Changes20Policies(b *testing.B) {
	dir := b.TempDir()
	policies, workloads := filepath.Join(dir, "policies"), filepath.Join(dir, "workloads")
	for _, d := range []string{policies, workloads} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 20 {
		writeBench(b, filepath.Join(policies, fmt.Sprintf("p%02d.yaml", i)), benchPolicy(i))
	}
	// Old objects first, then new ones: a workload given twice is an UPDATE.
	for _, half := range []string{"a-old", "b-new"} {
		for f := range 5 {
			var docs []string
			for i := f * 100; i < (f+1)*100; i++ {
				docs = append(docs, benchWorkload(i, half == "b-new"))
			}
			writeBench(b, filepath.Join(workloads, fmt.Sprintf("%s-%d.yaml", half, f)), strings.Join(docs, "---\n"))
		}
	}
	o := &Options{Policies: []string{policies}, Files: []string{workloads}, Output: "json"}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		err := Run(io.Discard, nil, o, now)
		if ee, ok := err.(*ExitError); err != nil && (!ok || ee.Code != 1) {
			b.Fatal(err)
		}
	}
}

func writeBench(b *testing.B, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

// benchPolicy selects the workloads labelled team=t<i%10>: every workload is judged by two
// policies, with the rules decided from the two objects.
func benchPolicy(i int) string {
	return fmt.Sprintf(`apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata:
  name: p%02d
spec:
  mode: Enforce
  targets:
    kinds: [Deployment, StatefulSet]
    selector:
      matchLabels: {team: t%d}
  rules:
    strategy:
      maxUnavailable: 1
    argsMatchReplicas:
    - container: server
      flag: --server-count
`, i, i%10)
}

// benchWorkload is a Deployment whose new form changes its image, with its --server-count
// wrong in one change out of ten.
func benchWorkload(i int, changed bool) string {
	image, count := "v1", 3
	if changed {
		image = "v2"
		if i%10 == 0 {
			count = 2
		}
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: w%d
  namespace: ns%d
  labels: {team: t%d}
spec:
  replicas: 3
  selector:
    matchLabels: {app: w%d}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1, maxSurge: 1}
  template:
    metadata:
      labels: {app: w%d, team: t%d}
    spec:
      containers:
      - name: server
        image: example.com/server:%s
        args: [--server-count=%d]
`, i, i%50, i%10, i, i, i%10, image, count)
}
