// Package policy holds what holdfast's policies share: which workloads and
// requesters a policy applies to, and how the actions of several policies combine.
package policy

import (
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

const serviceAccountPrefix = "system:serviceaccount:"

// Exempt reports whether the requester is one of the policy's exemptions.
func Exempt(e v1alpha1.Exemptions, user authenticationv1.UserInfo) bool {
	if slices.Contains(e.Users, user.Username) {
		return true
	}
	for _, g := range user.Groups {
		if slices.Contains(e.Groups, g) {
			return true
		}
	}
	if sa, ok := strings.CutPrefix(user.Username, serviceAccountPrefix); ok {
		// The API server names service accounts system:serviceaccount:<ns>:<name>;
		// the policy writes them <ns>/<name>.
		if ns, name, ok := strings.Cut(sa, ":"); ok && slices.Contains(e.ServiceAccounts, ns+"/"+name) {
			return true
		}
	}
	return false
}

// Selects reports whether targets select a workload of this kind, with these labels,
// in a namespace with these labels. An error means the policy's selectors are invalid.
func Selects(t v1alpha1.WorkloadTargets, kind v1alpha1.WorkloadKind, nsLabels, objLabels map[string]string) (bool, error) {
	if len(t.Kinds) > 0 && !slices.Contains(t.Kinds, kind) {
		return false, nil
	}
	ok, err := Matches(t.NamespaceSelector, nsLabels)
	if err != nil || !ok {
		return false, wrap("namespaceSelector", err)
	}
	ok, err = Matches(t.Selector, objLabels)
	return ok, wrap("selector", err)
}

// Matches reports whether a label selector selects a label set; a nil selector selects everything.
func Matches(sel *metav1.LabelSelector, set map[string]string) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(set)), nil
}

func wrap(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("spec.targets.%s: %w", field, err)
}
