package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// PolicyReports are written in the wgpolicyk8s.io format Kyverno and Policy Reporter read,
// one per RolloutPolicy and namespace, when that CRD is installed (holdfast never installs
// it).
var policyReportGVK = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}

// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;create;update

// policyReport is the audit's results in one namespace.
type policyReport struct {
	results    []any
	pass, fail int64
}

func (r *policyReport) add(kind v1alpha1.WorkloadKind, obj client.Object, found decision.Violations, now time.Time) {
	if len(found) == 0 {
		r.pass++
		return
	}
	r.fail++
	for _, v := range found {
		r.results = append(r.results, map[string]any{
			"source": "holdfast", "policy": v.Policy, "rule": v.Rule, "result": "fail", "scored": true,
			"message":   v.Message,
			"timestamp": map[string]any{"seconds": now.Unix(), "nanos": int64(0)},
			"resources": []any{map[string]any{"apiVersion": "apps/v1", "kind": string(kind),
				"namespace": obj.GetNamespace(), "name": obj.GetName(), "uid": string(obj.GetUID())}},
		})
	}
}

// reportName is the PolicyReport of a RolloutPolicy in each namespace.
func reportName(policy string) string {
	name := "holdfast-" + policy
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}

// writeReports writes the policy's PolicyReports, when the CRD is installed.
func (r *RolloutPolicyStatus) writeReports(ctx context.Context, p *v1alpha1.RolloutPolicy, reports map[string]*policyReport) error {
	if _, err := r.Client.RESTMapper().RESTMapping(policyReportGVK.GroupKind(), policyReportGVK.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return nil // no PolicyReport CRD: nothing to write
		}
		return err
	}
	for ns, rep := range reports {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(policyReportGVK)
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: reportName(p.Name)}, u)
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading PolicyReport %s/%s: %w", ns, reportName(p.Name), err)
		}
		if !exists {
			u = &unstructured.Unstructured{}
			u.SetGroupVersionKind(policyReportGVK)
			u.SetNamespace(ns)
			u.SetName(reportName(p.Name))
			u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "holdfast", "holdfast.dev/policy": p.Name})
		}
		results := rep.results
		if results == nil {
			results = []any{}
		}
		summary := map[string]any{"pass": rep.pass, "fail": rep.fail, "warn": int64(0), "error": int64(0), "skip": int64(0)}
		if exists {
			// A result already reported keeps the time it was first found, and a report
			// that says what it said is not written again.
			results = keepTimestamps(u.Object["results"], results)
			if sameJSON(u.Object["results"], results) && sameJSON(u.Object["summary"], summary) {
				continue
			}
		}
		u.Object["results"] = results
		u.Object["summary"] = summary
		if exists {
			err = r.Client.Update(ctx, u)
		} else {
			err = r.Client.Create(ctx, u)
		}
		if err != nil {
			return fmt.Errorf("writing PolicyReport %s/%s: %w", ns, reportName(p.Name), err)
		}
	}
	return nil
}

// resultKey names a result by what it says of which workload.
func resultKey(result any) string {
	m, _ := result.(map[string]any)
	raw, _ := json.Marshal([]any{m["policy"], m["rule"], m["message"], m["resources"]})
	return string(raw)
}

// keepTimestamps gives each result of next the timestamp of the same result in prev.
func keepTimestamps(prev any, next []any) []any {
	old, _ := prev.([]any)
	seen := make(map[string]any, len(old))
	for _, r := range old {
		if m, ok := r.(map[string]any); ok {
			seen[resultKey(r)] = m["timestamp"]
		}
	}
	out := make([]any, len(next))
	for i, r := range next {
		m, ok := r.(map[string]any)
		if ts, found := seen[resultKey(r)]; ok && found && ts != nil {
			c := make(map[string]any, len(m))
			for k, v := range m {
				c[k] = v
			}
			c["timestamp"] = ts
			r = c
		}
		out[i] = r
	}
	return out
}

// sameJSON compares values as JSON, so that what the API server returned (int64, any)
// and what was built (typed) compare by content.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}
