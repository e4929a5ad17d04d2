package policy

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// NamespaceMetadata is an empty Namespace read as metadata only: the form in which
// holdfast's cache keeps namespaces, whose labels are all namespace selectors read.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// NamespaceLabels reads a namespace's labels from the cache, for namespace selectors. The
// map is the cache's own: read it, never write it.
func NamespaceLabels(ctx context.Context, r client.Reader, name string) (map[string]string, error) {
	ns := namespaces.Get().(*metav1.PartialObjectMetadata)
	defer func() {
		*ns = metav1.PartialObjectMetadata{TypeMeta: namespaceType}
		namespaces.Put(ns)
	}()
	if err := informer.Get(ctx, r, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %q: %w", name, err)
	}
	return ns.Labels, nil
}

// namespaceType is a namespace's, read as metadata only.
var namespaceType = NamespaceMetadata().TypeMeta

// namespaces are the objects NamespaceLabels reads into, one per request otherwise: only
// the labels map, the cache's own, outlives the read.
var namespaces = sync.Pool{New: func() any { return NamespaceMetadata() }}

// AllNamespaceLabels reads every namespace's labels from the cache (metadata only, not
// copied), by namespace name: read them, never write them.
func AllNamespaceLabels(ctx context.Context, r client.Reader) (map[string]map[string]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := informer.List(ctx, r, list); err != nil {
		return nil, err
	}
	out := make(map[string]map[string]string, len(list.Items))
	for _, ns := range list.Items {
		out[ns.Name] = ns.Labels
	}
	return out, nil
}

// OutsideByNamespaceOnly reports whether sel selects objLabels while nsSel, which is set,
// does not select the namespace named nsName with nsLabels: an object a policy would select
// but for its namespace's labels as read. Read from a cache, those labels may not show yet
// a relabel that brought the namespace in (LiveNamespaceLabels), unless nsSel leaves the
// namespace out by its name (excludedByName): no relabel brings it in then. Selectors that
// do not compile select nothing.
func (m *Matcher) OutsideByNamespaceOnly(nsSel, sel *metav1.LabelSelector, nsName string, nsLabels, objLabels map[string]string) bool {
	if nsSel == nil {
		return false
	}
	if inNs, err := m.Matches(nsSel, nsLabels); err != nil || inNs || excludedByName(nsSel, nsName) {
		return false
	}
	ok, err := m.Matches(sel, objLabels)
	return err == nil && ok
}

// excludedByName reports whether a requirement of nsSel on kubernetes.io/metadata.name
// fails for the namespace named name. The API server sets that label to the namespace's
// name on every write and read (kube's namespace defaulting and Canonicalize), so no
// relabel can change what such a requirement answers: a policy that selects tenants'
// namespaces by name never needs the namespace read live for another tenant's workload.
func excludedByName(nsSel *metav1.LabelSelector, name string) bool {
	if name == "" {
		return false // no name to read the label off: the cache's labels, and the live read, decide
	}
	if v, ok := nsSel.MatchLabels[corev1.LabelMetadataName]; ok && v != name {
		return true
	}
	for _, r := range nsSel.MatchExpressions {
		if r.Key != corev1.LabelMetadataName {
			continue
		}
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if !slices.Contains(r.Values, name) {
				return true
			}
		case metav1.LabelSelectorOpNotIn:
			if slices.Contains(r.Values, name) {
				return true
			}
		case metav1.LabelSelectorOpDoesNotExist:
			return true
		}
	}
	return false
}

// LiveNamespaceLabels reads a namespace's labels from the API server (metadata only).
func LiveNamespaceLabels(ctx context.Context, live client.Reader, name string) (map[string]string, error) {
	ns := NamespaceMetadata()
	if err := live.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %q from the API server: %w", name, err)
	}
	return ns.Labels, nil
}
