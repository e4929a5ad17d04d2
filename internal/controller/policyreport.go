package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/policyreport"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// PolicyReports are written in the wgpolicyk8s.io format Kyverno and Policy Reporter read
// (internal/policyreport), one per RolloutPolicy and namespace, when that CRD is installed
// (holdfast never installs it).

// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;create;update

// policyReport is the audit's results in one namespace: a fail result per violation, and
// the workloads that pass or fail counted.
type policyReport struct {
	results []any
	summary policyreport.Summary
}

func (r *policyReport) add(kind v1alpha1.WorkloadKind, obj client.Object, found decision.Violations, now time.Time) {
	if len(found) == 0 {
		r.summary.Pass++
		return
	}
	r.summary.Fail++
	w := workload.Ref{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
	for _, v := range found {
		r.results = append(r.results, policyreport.Result(v.Policy, v.Rule, policyreport.Fail, v.Message, w, now))
	}
}

// writeReports writes the policy's PolicyReports, when the CRD is installed.
func (r *RolloutPolicyStatus) writeReports(ctx context.Context, p *v1alpha1.RolloutPolicy, reports map[string]*policyReport) error {
	if _, err := r.Client.RESTMapper().RESTMapping(policyreport.GVK.GroupKind(), policyreport.GVK.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return nil // no PolicyReport CRD: nothing to write
		}
		return err
	}
	for ns, rep := range reports {
		name := policyreport.Name(p.Name)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(policyreport.GVK)
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading PolicyReport %s/%s: %w", ns, name, err)
		}
		if err != nil {
			err = r.Client.Create(ctx, policyreport.New(ns, p.Name, rep.results, rep.summary))
		} else {
			// A result already reported keeps the time it was first found, and a report
			// that says what it said is not written again.
			next := policyreport.New(ns, p.Name, keepTimestamps(u.Object["results"], rep.results), rep.summary)
			if sameJSON(u.Object["results"], next.Object["results"]) && sameJSON(u.Object["summary"], next.Object["summary"]) {
				continue
			}
			u.Object["results"], u.Object["summary"] = next.Object["results"], next.Object["summary"]
			err = r.Client.Update(ctx, u)
		}
		if err != nil {
			return fmt.Errorf("writing PolicyReport %s/%s: %w", ns, name, err)
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
