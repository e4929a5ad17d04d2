package decision

import (
	"testing"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

func TestActionForOrdersModes(t *testing.T) {
	if !(ActionFor(v1alpha1.ModeEnforce) > ActionFor(v1alpha1.ModeWarn) && ActionFor(v1alpha1.ModeWarn) > ActionFor(v1alpha1.ModeAudit) && ActionFor(v1alpha1.ModeAudit) > Allow) {
		t.Error("want Enforce > Warn > Audit > Allow")
	}
	if ActionFor("") != Deny {
		t.Error("an unset mode must enforce, as the CRD defaults it")
	}
}
