package decision

import "github.com/holdfast-dev/holdfast/api/v1alpha1"

// Action is what holdfast does with a request, ordered from the mildest to the strictest.
type Action int

const (
	Allow Action = iota
	Audit
	Warn
	Deny
)

func (a Action) String() string {
	switch a {
	case Audit:
		return "audit"
	case Warn:
		return "warn"
	case Deny:
		return "deny"
	default:
		return "allow"
	}
}

// ActionFor is the action a violation of a policy in this mode calls for.
// An unset mode is Enforce, as the CRD defaults it.
func ActionFor(m v1alpha1.Mode) Action {
	switch m {
	case v1alpha1.ModeWarn:
		return Warn
	case v1alpha1.ModeAudit:
		return Audit
	default:
		return Deny
	}
}
