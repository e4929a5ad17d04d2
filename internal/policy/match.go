// Package policy holds what holdfast's policies share: which workloads and
// requesters a policy applies to, and how the actions of several policies combine.
package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

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
	s, err := compile(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(set)), nil
}

// compiled holds label selectors compiled for Matches, by address: policies are read
// from the informer cache without copying, so the same selector comes back on every
// request until the policy changes. Each entry keeps a copy of what it compiled and is
// used only while the selector still equals it.
var compiled = struct {
	sync.RWMutex
	m map[*metav1.LabelSelector]compiledSelector
}{m: map[*metav1.LabelSelector]compiledSelector{}}

type compiledSelector struct {
	source   *metav1.LabelSelector
	selector labels.Selector
	err      error
}

// maxCompiled bounds the cache; it is emptied when full.
const maxCompiled = 4096

func compile(sel *metav1.LabelSelector) (labels.Selector, error) {
	compiled.RLock()
	c, ok := compiled.m[sel]
	compiled.RUnlock()
	if ok && sameSelector(c.source, sel) {
		return c.selector, c.err
	}
	c = compiledSelector{source: sel.DeepCopy()}
	c.selector, c.err = metav1.LabelSelectorAsSelector(sel)
	compiled.Lock()
	if len(compiled.m) >= maxCompiled {
		clear(compiled.m)
	}
	compiled.m[sel] = c
	compiled.Unlock()
	return c.selector, c.err
}

func sameSelector(a, b *metav1.LabelSelector) bool {
	return maps.Equal(a.MatchLabels, b.MatchLabels) &&
		slices.EqualFunc(a.MatchExpressions, b.MatchExpressions, func(x, y metav1.LabelSelectorRequirement) bool {
			return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
		})
}

func wrap(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("spec.targets.%s: %w", field, err)
}
