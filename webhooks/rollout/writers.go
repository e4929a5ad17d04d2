package rollout

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/apijson"
)

// Writers names who wrote what a refusal refuses: the request's user and field manager,
// and the field manager that last changed the workload's template (informer.Writers), so
// that two writers alternating templates (an operator and a GitOps controller, two
// operators) can be told from the refusal alone.
type Writers struct {
	// User and FieldManager are of the request; FieldManager is "" when the client named
	// none (the API server then names it after the client's user agent).
	User, FieldManager string
	// Template is the field manager that last changed the template of the workload as
	// the cache holds it; "" when unknown.
	Template string
}

// String is the sentence a refusal ends with.
func (w Writers) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "request by user %q", w.User)
	if w.FieldManager != "" {
		fmt.Fprintf(&b, " with field manager %q", w.FieldManager)
	}
	if w.Template != "" {
		fmt.Fprintf(&b, "; the template was last changed by field manager %q", w.Template)
		if w.FieldManager != "" && w.FieldManager != w.Template {
			b.WriteString(": two writers may be alternating templates (docs/troubleshooting.md, \"Who is fighting\")")
		}
	}
	return b.String()
}

// requestWriters are the writers of a refused request. The field manager is read from the
// request's options (CreateOptions, UpdateOptions or PatchOptions, which all carry it as
// fieldManager) only now: an allowed request never decodes them.
func (h *Handler) requestWriters(req admission.Request, in *Input) Writers {
	w := Writers{User: req.UserInfo.Username}
	if raw := req.Options.Raw; len(raw) > 0 {
		var opts struct {
			FieldManager string `json:"fieldManager"`
		}
		if apijson.Unmarshal(raw, &opts) == nil {
			w.FieldManager = opts.FieldManager
		}
	}
	if req.Operation == admissionv1.Update && in.Old != nil {
		w.Template = h.Writers.Get(in.Old.UID)
	}
	return w
}
