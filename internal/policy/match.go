// Package policy holds what holdfast's policies share: which objects and requesters a
// policy applies to, and how the int-or-percent fields they read resolve.
package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

const serviceAccountPrefix = "system:serviceaccount:"

// Exempt reports whether the requester is one of the policy's permanent exemptions.
func Exempt(e v1alpha1.Exemptions, user authenticationv1.UserInfo) bool {
	return names(e.Users, e.Groups, e.ServiceAccounts, user)
}

// ExemptAt reports whether the requester is exempt at now: by a permanent exemption
// (grant nil), or by a temporary one that has not expired (grant names it).
func ExemptAt(e v1alpha1.Exemptions, user authenticationv1.UserInfo, now time.Time) (exempt bool, grant *v1alpha1.TemporaryExemption) {
	if Exempt(e, user) {
		return true, nil
	}
	for i := range e.Temporary {
		t := &e.Temporary[i]
		if now.Before(t.Expires.Time) && names(t.Users, t.Groups, t.ServiceAccounts, user) {
			return true, t
		}
	}
	return false, nil
}

// Expired names the temporary exemptions that no longer apply at now, by their reasons.
func Expired(e v1alpha1.Exemptions, now time.Time) []string {
	var out []string
	for _, t := range e.Temporary {
		if !now.Before(t.Expires.Time) {
			out = append(out, t.Reason)
		}
	}
	return out
}

// RequesterFor returns the first requester entry that names the user, nil when none does.
func RequesterFor(rs []v1alpha1.Requester, user authenticationv1.UserInfo) *v1alpha1.Requester {
	for i := range rs {
		if names(rs[i].Users, rs[i].Groups, rs[i].ServiceAccounts, user) {
			return &rs[i]
		}
	}
	return nil
}

// names reports whether the user is one of the users, in one of the groups, or one of the
// service accounts (written namespace/name).
func names(users, groups, serviceAccounts []string, user authenticationv1.UserInfo) bool {
	if slices.Contains(users, user.Username) {
		return true
	}
	for _, g := range user.Groups {
		if slices.Contains(groups, g) {
			return true
		}
	}
	if sa, ok := strings.CutPrefix(user.Username, serviceAccountPrefix); ok {
		// The API server names service accounts system:serviceaccount:<ns>:<name>;
		// the policy writes them <ns>/<name>.
		if ns, name, ok := strings.Cut(sa, ":"); ok && slices.ContainsFunc(serviceAccounts, func(s string) bool {
			// s == ns+"/"+name, without building it per request
			return len(s) == len(ns)+1+len(name) && s[len(ns)] == '/' && s[:len(ns)] == ns && s[len(ns)+1:] == name
		}) {
			return true
		}
	}
	return false
}

// Matcher evaluates policies' targets. It keeps the label selectors it compiled, by
// address: policies are read from the informer cache without copying, so the same
// selector comes back on every request until the policy changes. Each entry keeps a copy
// of what it compiled and is used only while the selector still equals it. A nil Matcher
// compiles every selector it is asked about.
type Matcher struct {
	mu       sync.RWMutex
	compiled map[*metav1.LabelSelector]compiledSelector
}

type compiledSelector struct {
	source   *metav1.LabelSelector
	selector labels.Selector
	err      error
}

// maxCompiled bounds a Matcher's selectors; they are all dropped when it is full.
const maxCompiled = 4096

// NewMatcher returns a Matcher that keeps the selectors it compiles.
func NewMatcher() *Matcher {
	return &Matcher{compiled: map[*metav1.LabelSelector]compiledSelector{}}
}

// Selects reports whether targets select a workload of this kind, with these labels, in a
// namespace with these labels. An error means a selector is invalid (Compile) and the
// others do not rule the workload out; the guards then take the policy to select nothing.
func (m *Matcher) Selects(t v1alpha1.WorkloadTargets, kind v1alpha1.WorkloadKind, nsLabels, objLabels map[string]string) (bool, error) {
	if len(t.Kinds) > 0 && !slices.Contains(t.Kinds, kind) {
		return false, nil
	}
	return m.selects(t.NamespaceSelector, t.Selector, nsLabels, objLabels)
}

// SelectsPods reports whether a DisruptionPolicy's targets select a pod with these labels
// in a namespace with these labels. An error means a selector is invalid (Compile) and the
// other does not rule the pod out; the guards then take the policy to select nothing.
func (m *Matcher) SelectsPods(t v1alpha1.PodTargets, nsLabels, podLabels map[string]string) (bool, error) {
	return m.selects(t.NamespaceSelector, t.Selector, nsLabels, podLabels)
}

// selects matches both selectors. A valid selector that does not match rules the object
// out whatever the other says: an invalid policy reaches no further than its valid parts.
func (m *Matcher) selects(nsSel, sel *metav1.LabelSelector, nsLabels, objLabels map[string]string) (bool, error) {
	nsOK, nsErr := m.Matches(nsSel, nsLabels)
	ok, err := m.Matches(sel, objLabels)
	switch {
	case (nsErr == nil && !nsOK) || (err == nil && !ok):
		return false, nil
	case nsErr != nil:
		return false, wrap("namespaceSelector", nsErr)
	case err != nil:
		return false, wrap("selector", err)
	}
	return true, nil
}

// Matches reports whether a label selector selects a label set; a nil selector selects everything.
func (m *Matcher) Matches(sel *metav1.LabelSelector, set map[string]string) (bool, error) {
	if sel == nil {
		return true, nil
	}
	s, err := m.compile(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(set)), nil
}

// Compile is a policy's label selector as holdfast evaluates it: an error for one the API
// server would not accept in a webhook configuration either, so that a policy holdfast
// evaluates is one its scoped webhook entries can select by (internal/interception).
func Compile(sel *metav1.LabelSelector) (labels.Selector, error) {
	if errs := metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, nil); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return metav1.LabelSelectorAsSelector(sel)
}

func (m *Matcher) compile(sel *metav1.LabelSelector) (labels.Selector, error) {
	if m == nil {
		return Compile(sel)
	}
	m.mu.RLock()
	c, ok := m.compiled[sel]
	m.mu.RUnlock()
	if ok && sameSelector(c.source, sel) {
		return c.selector, c.err
	}
	c = compiledSelector{source: sel.DeepCopy()}
	c.selector, c.err = Compile(sel)
	m.mu.Lock()
	if len(m.compiled) >= maxCompiled {
		clear(m.compiled)
	}
	m.compiled[sel] = c
	m.mu.Unlock()
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

// SelectedWorkloads lists, from the cache, the workloads of the kinds the targets name
// that they select; nsLabels are every namespace's labels (AllNamespaceLabels).
func SelectedWorkloads(ctx context.Context, r client.Reader, m *Matcher, t v1alpha1.WorkloadTargets, nsLabels map[string]map[string]string) ([]workload.Ref, error) {
	var out []workload.Ref
	err := EachSelected(ctx, r, m, t, nsLabels, func(k v1alpha1.WorkloadKind, o client.Object) {
		out = append(out, workload.Ref{Kind: k, Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()})
	})
	return out, err
}

// EachSelected calls f with each workload, from the cache and not copied (read it, never
// write it), of the kinds the targets name that they select.
func EachSelected(ctx context.Context, r client.Reader, m *Matcher, t v1alpha1.WorkloadTargets, nsLabels map[string]map[string]string, f func(v1alpha1.WorkloadKind, client.Object)) error {
	selects := func(k v1alpha1.WorkloadKind) func(client.Object) {
		return func(o client.Object) {
			if sel, err := m.Selects(t, k, nsLabels[o.GetNamespace()], o.GetLabels()); err == nil && sel {
				f(k, o)
			}
		}
	}
	// The namespaces first: a policy that selects a few namespaces of a cluster of tens of
	// thousands of workloads (a fleet's, read on each of its starts, one after another
	// while a burst's starts are recorded) walks their workloads alone, by the informers'
	// namespace index. That is exact when its valid selector selects no namespace of no
	// labels: a namespace the labels do not know (nsLabels[ns] is nil) is then outside,
	// as Selects would judge it.
	if t.NamespaceSelector != nil {
		if none, err := m.Matches(t.NamespaceSelector, nil); err == nil && !none {
			var inside []string
			for ns, l := range nsLabels {
				if ok, err := m.Matches(t.NamespaceSelector, l); err == nil && ok {
					inside = append(inside, ns)
				}
			}
			slices.Sort(inside)
			for _, k := range workload.Targeted(t) {
				if err := workload.EachInNamespaces(ctx, r, k, inside, selects(k)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// Otherwise every workload of the kinds, each namespace its valid selector does not
	// match ruled out by one map read; one the labels do not know is judged by Selects.
	var outside map[string]bool
	if t.NamespaceSelector != nil {
		outside = make(map[string]bool, len(nsLabels))
		for ns, l := range nsLabels {
			if ok, err := m.Matches(t.NamespaceSelector, l); err == nil && !ok {
				outside[ns] = true
			}
		}
	}
	for _, k := range workload.Targeted(t) {
		each := selects(k)
		err := workload.Each(ctx, r, k, func(o client.Object) {
			if !outside[o.GetNamespace()] {
				each(o)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}
