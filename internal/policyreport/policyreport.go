// Package policyreport builds PolicyReports in the wgpolicyk8s.io format Kyverno and
// Policy Reporter read: the leader's background audit writes them into the cluster
// (internal/controller) and holdfast check prints them (-o policyreport), alike. The
// report's name, labels and the results' fields are an API: golden files pin them.
package policyreport

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

// GVK is the PolicyReport's kind, which holdfast never installs.
var GVK = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}

// The results a report gives: a rule that passes, fails, warns (a Warn policy's finding),
// or was skipped (not evaluated, or let through by a temporary exemption).
const (
	Pass = "pass"
	Fail = "fail"
	Warn = "warn"
	Skip = "skip"
)

// Name is the PolicyReport of a RolloutPolicy in each namespace.
func Name(policy string) string {
	name := "holdfast-" + policy
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}

// Labels are the labels of a RolloutPolicy's PolicyReports.
func Labels(policy string) map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "holdfast", "holdfast.dev/policy": policy}
}

// Result is one result of a report: what a policy's rule found of a workload at now.
func Result(policy, rule, result, message string, w workload.Ref, now time.Time) map[string]any {
	resource := map[string]any{"apiVersion": "apps/v1", "kind": string(w.Kind), "namespace": w.Namespace, "name": w.Name}
	if w.UID != "" {
		resource["uid"] = string(w.UID)
	}
	return map[string]any{
		"source": "holdfast", "policy": policy, "rule": rule, "result": result, "scored": true,
		"message":   message,
		"timestamp": map[string]any{"seconds": now.Unix(), "nanos": int64(0)},
		"resources": []any{resource},
	}
}

// Summary counts what a report found.
type Summary struct {
	Pass, Fail, Warn, Error, Skip int64
}

// Object is the summary as the report's summary field holds it.
func (s Summary) Object() map[string]any {
	return map[string]any{"pass": s.Pass, "fail": s.Fail, "warn": s.Warn, "error": s.Error, "skip": s.Skip}
}

// Count adds a result to the summary.
func (s *Summary) Count(result string) {
	switch result {
	case Pass:
		s.Pass++
	case Fail:
		s.Fail++
	case Warn:
		s.Warn++
	case Skip:
		s.Skip++
	default:
		s.Error++
	}
}

// New is the PolicyReport of the policy in the namespace, with its results and summary.
func New(namespace, policy string, results []any, s Summary) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(namespace)
	u.SetName(Name(policy))
	u.SetLabels(Labels(policy))
	if results == nil {
		results = []any{}
	}
	u.Object["results"] = results
	u.Object["summary"] = s.Object()
	return u
}
