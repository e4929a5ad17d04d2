package rollout

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Path is where the rollout webhook is served.
const Path = "/validate-rollout"

// Handler gathers a rollout decision's inputs from the request and the caches,
// calls Decide, and turns the decision into an admission response.
type Handler struct {
	// Reader reads policies and namespaces; in the manager it is backed by informer caches.
	Reader  client.Reader
	Decoder admission.Decoder
}

var _ admission.Handler = &Handler{}

// +kubebuilder:rbac:groups=holdfast.dev,resources=rolloutpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	log := logf.FromContext(ctx)

	in, err := h.decode(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if in.New == nil {
		return admission.Allowed("") // DELETE and CONNECT are not guarded.
	}

	var policies v1alpha1.RolloutPolicyList
	if err := h.Reader.List(ctx, &policies); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("listing RolloutPolicies: %w", err))
	}
	if len(policies.Items) == 0 {
		return admission.Allowed("")
	}
	in.Policies = policies.Items
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading namespace %q: %w", req.Namespace, err))
	}
	in.NamespaceLabels = ns.Labels

	d := Decide(in)
	observe(req.Kind.Kind, d, time.Since(start))
	if len(d.Violations) > 0 {
		log.Info("Rollout policy violated", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
			"action", d.Action().String(), "violations", messages(d.Violations, policy.Audit))
	}
	return respond(d)
}

// decode reads the new and old objects of the request as workloads.
func (h *Handler) decode(req admission.Request) (Input, error) {
	in := Input{Operation: req.Operation, User: req.UserInfo}
	if req.Kind.Group != "apps" || req.Kind.Version != "v1" {
		return in, fmt.Errorf("unsupported kind %s: holdfast guards apps/v1 Deployments, StatefulSets and DaemonSets", req.Kind)
	}
	read := func(raw runtime.RawExtension, what string) (*workload.Workload, error) {
		obj, err := workload.New(req.Kind.Kind)
		if err != nil {
			return nil, err
		}
		if err := h.Decoder.DecodeRaw(raw, obj); err != nil {
			return nil, fmt.Errorf("decoding %s as %s: %w", what, req.Kind.Kind, err)
		}
		return workload.From(obj)
	}
	var err error
	switch req.Operation {
	case admissionv1.Create:
		in.New, err = read(req.Object, "object")
	case admissionv1.Update:
		if len(req.OldObject.Raw) == 0 {
			return in, fmt.Errorf("UPDATE request without oldObject")
		}
		if in.New, err = read(req.Object, "object"); err == nil {
			in.Old, err = read(req.OldObject, "oldObject")
		}
	}
	return in, err
}

// respond maps a decision to the admission response: a 403 listing every violation when
// any policy enforces; otherwise allowed, with warnings and audit annotations.
func respond(d Decision) admission.Response {
	if d.Action() == policy.Deny {
		status := metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: strings.Join(messages(d.Violations, policy.Deny), "; "),
			Details: &metav1.StatusDetails{},
		}
		for _, v := range d.Violations {
			cause := metav1.StatusCause{Type: CauseType, Message: v.String()}
			if v.Field != nil {
				cause.Field = v.Field.String()
			}
			status.Details.Causes = append(status.Details.Causes, cause)
		}
		resp := admission.ValidationResponse(false, status.Message)
		resp.Result = &status
		return withReports(resp, d)
	}
	return withReports(admission.Allowed(""), d)
}

// CauseType marks the status causes of holdfast's rollout denials.
const CauseType metav1.CauseType = "holdfast.dev/RolloutPolicy"

// withReports adds the violations of Warn policies as warnings and those of Audit
// policies as audit annotations, keyed by rule.
func withReports(resp admission.Response, d Decision) admission.Response {
	resp.Warnings = append(resp.Warnings, messagesAt(d.Violations, policy.Warn)...)
	for _, v := range d.Violations {
		if v.Action != policy.Audit {
			continue
		}
		if resp.AuditAnnotations == nil {
			resp.AuditAnnotations = map[string]string{}
		}
		if prev, ok := resp.AuditAnnotations[v.Rule]; ok {
			resp.AuditAnnotations[v.Rule] = prev + "; " + v.String()
		} else {
			resp.AuditAnnotations[v.Rule] = v.String()
		}
	}
	return resp
}

// messages renders the violations at or above the given action.
func messages(vs []Violation, atLeast policy.Action) []string {
	var out []string
	for _, v := range vs {
		if v.Action >= atLeast {
			out = append(out, v.String())
		}
	}
	return out
}

// messagesAt renders the violations of exactly the given action.
func messagesAt(vs []Violation, a policy.Action) []string {
	var out []string
	for _, v := range vs {
		if v.Action == a {
			out = append(out, v.String())
		}
	}
	return out
}

// The webhook configuration generated from this marker is the base the chart and the
// kustomize config refine (namespaceSelector, matchConditions, failure policy).
// +kubebuilder:webhook:path=/validate-rollout,mutating=false,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups=apps,resources=deployments;statefulsets;daemonsets,verbs=create;update,versions=v1,name=rollout.holdfast.dev,admissionReviewVersions=v1,timeoutSeconds=3,matchPolicy=Equivalent
