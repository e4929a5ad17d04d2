package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// NamespacePath is where HandleNamespace is served.
const NamespacePath = interception.NamespacePath

// HandleNamespace judges a namespace UPDATE whose labels bring workloads into a
// RolloutPolicy's selection (platform admins and GitOps relabel namespaces; tenants
// cannot): each workload it brings in is judged on what it brings, as a workload's own
// relabel is (checkEntering, checkEnteredChange), so that moving a namespace out, changing
// its workloads freely and moving it back is no way around a policy. Moving a namespace
// out of a selection is not refused (it is an administrator's change to what policies
// cover), and a DELETE is never sent. The scoped entry sends only the relabels that change
// a policy's selection of the namespace (interception.SelectsCEL). The namespace's
// workloads are read from the API server (Live), one list per kind, within the bound the
// ledgers keep inside the webhook's timeout: a change made outside the selection a moment
// ago, which the cache may not show yet, is what the relabel brings in. Their revisions are
// read from the cache. A request that runs out of time answers "retry", never "allow". The
// identity that onboards namespaces is exempted in the policy as any requester is
// (spec.exemptions).
func (h *Handler) HandleNamespace(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var ns, old corev1.Namespace
	if bad, ok := decodeRelabel(req, "Namespace", &ns, &old); !ok {
		return bad
	}
	var policies v1alpha1.RolloutPolicyList
	if err := informer.List(ctx, h.Reader, &policies); err != nil {
		return retryNamespace(err)
	}
	now := h.Clock.Now()
	ctx, cancel := h.Ledgers.Bound(ctx)
	defer cancel()
	workloads := map[v1alpha1.WorkloadKind][]runtime.Object{}
	var vs decision.Violations
	for i := range policies.Items {
		p := &policies.Items[i]
		exempt, grant := policy.ExemptAt(p.Spec.Exemptions, req.UserInfo, now)
		if p.Spec.Suspend || (exempt && grant == nil) {
			continue
		}
		found, err := h.entering(ctx, p, &ns, old.Labels, req, now, workloads)
		if err != nil {
			return retryNamespace(err)
		}
		if grant != nil && len(found) > 0 {
			vs = append(vs, exempted(p.Name, grant, found))
			continue
		}
		for _, f := range found {
			vs = append(vs, decision.Violation{Policy: p.Name, Rule: f.rule, Action: decision.ActionFor(p.Spec.Mode), Field: f.field,
				Message: fmt.Sprintf("relabelling namespace %s: %s", ns.Name, f.message)})
		}
	}
	vs.SortByPolicy()
	return Respond(Decision{Violations: vs})
}

// entering judges, under one policy, each workload of the namespace that its new labels
// bring into the policy's selection. read holds the namespace's workloads by kind, as
// listed for an earlier policy of the request.
func (h *Handler) entering(ctx context.Context, p *v1alpha1.RolloutPolicy, ns *corev1.Namespace, oldLabels map[string]string,
	req admission.Request, now time.Time, read map[v1alpha1.WorkloadKind][]runtime.Object) ([]finding, error) {
	var out []finding
	for _, k := range workload.Targeted(p.Spec.Targets) {
		objs, ok := read[k]
		if !ok {
			list, _ := workload.NewList(k)
			r := h.Reader
			if h.Live != nil {
				r = h.Live
			}
			if err := informer.ListIn(ctx, r, list, ns.Name); err != nil {
				return nil, err
			}
			var err error
			if objs, err = meta.ExtractList(list); err != nil {
				return nil, err
			}
			read[k] = objs
		}
		for _, obj := range objs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			o, ok := obj.(client.Object)
			if !ok {
				continue
			}
			selectsNew, err1 := h.Matcher.Selects(p.Spec.Targets, k, ns.Labels, o.GetLabels())
			selectedOld, err2 := h.Matcher.Selects(p.Spec.Targets, k, oldLabels, o.GetLabels())
			if err1 != nil || err2 != nil || !selectsNew || selectedOld {
				continue
			}
			w, err := workload.From(o)
			if err != nil {
				continue // not a workload holdfast can read: nothing it could judge
			}
			in := Input{Operation: admissionv1.Update, Old: w, New: w, NamespaceLabels: ns.Labels, User: req.UserInfo,
				Policies: []v1alpha1.RolloutPolicy{*p}, Matcher: h.Matcher, Now: now}
			if err := h.readRevisions(ctx, &in); err != nil {
				return nil, err
			}
			for _, f := range append(checkEntering(in), checkEnteredChange(in, &p.Spec)...) {
				f.field = field.NewPath("metadata", "labels")
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// decodeRelabel decodes the core object of kind an UPDATE sent to a relabel webhook
// carries, and its stored form; a 400 (ok false) for another kind or what does not decode.
func decodeRelabel(req admission.Request, kind string, obj, old any) (bad admission.Response, ok bool) {
	what := strings.ToLower(kind)
	if req.Kind.Group != "" || req.Kind.Kind != kind {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unsupported kind %s: this webhook judges %s relabels", req.Kind, what)), false
	}
	if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", what, err)), false
	}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored %s: %w", what, err)), false
	}
	return admission.Response{}, true
}

// retryNamespace answers a namespace relabel holdfast could not judge in time
// (decision.Retry).
func retryNamespace(err error) admission.Response {
	return decision.Retry("the workloads the new labels bring into a RolloutPolicy's selection", err)
}
