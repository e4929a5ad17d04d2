package informer

import (
	"bytes"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Writers keeps, for each workload the cache holds, the field manager that last changed
// its pod template: the one thing of its managedFields the cache keeps (Options strips
// the rest). A refusal names it, and the revision journal records it with each template,
// so that two writers alternating templates can be told apart. It costs one string per
// workload, keyed by UID; a nil *Writers keeps nothing.
type Writers struct {
	mu sync.RWMutex
	by map[types.UID]string
}

// NewWriters is an empty Writers.
func NewWriters() *Writers { return &Writers{by: map[types.UID]string{}} }

// Get is the field manager that last changed the pod template of the workload with the
// UID, "" when none is known.
func (w *Writers) Get(uid types.UID) string {
	if w == nil {
		return ""
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.by[uid]
}

// Forget drops a deleted workload.
func (w *Writers) Forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.by, uid)
}

// Observe keeps the template's writer of obj as the cache's transform does, for a store
// that has none (the simulator's in-memory cluster).
func (w *Writers) Observe(obj metav1.Object) { w.record(obj) }

// record keeps the template's writer of obj, read from its managedFields before they are
// stripped; an object whose managed fields own no template field keeps nothing. One without
// managed fields (stripped already: an informer's first list, streamed as a watch, passes
// each object through the transform twice; or managed fields disabled) changes nothing.
func (w *Writers) record(obj metav1.Object) {
	if w == nil || obj.GetUID() == "" || len(obj.GetManagedFields()) == 0 {
		return
	}
	m := TemplateWriter(obj.GetManagedFields())
	w.mu.Lock()
	defer w.mu.Unlock()
	if m == "" {
		delete(w.by, obj.GetUID())
		return
	}
	w.by[obj.GetUID()] = m
}

// Len is how many workloads have a writer kept.
func (w *Writers) Len() int {
	if w == nil {
		return 0
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.by)
}

// templateField is the key of spec.template in a FieldsV1 set.
var templateField = []byte(`"f:template"`)

// TemplateWriter is the manager of the managedFields entry that owns a field under
// spec.template and was written last (operation Update or Apply on the object itself, not
// a subresource), "" when none does. The API server moves a field's ownership to the
// manager whose request changed it and stamps that manager's entry with the time, so the
// newest entry that owns part of the template is the one that changed it last
// (k8s.io/apimachinery/pkg/util/managedfields/internal/managedfieldsupdater.go, Update).
func TemplateWriter(entries []metav1.ManagedFieldsEntry) string {
	var best string
	var bestAt metav1.Time
	for i := range entries {
		e := &entries[i]
		if e.Subresource != "" || e.FieldsV1 == nil || (e.Operation != metav1.ManagedFieldsOperationUpdate && e.Operation != metav1.ManagedFieldsOperationApply) {
			continue
		}
		if !bytes.Contains(e.FieldsV1.Raw, templateField) || !ownsTemplate(e.FieldsV1.Raw) {
			continue
		}
		var at metav1.Time
		if e.Time != nil {
			at = *e.Time
		}
		if best == "" || bestAt.Before(&at) {
			best, bestAt = e.Manager, at
		}
	}
	return best
}

// ownsTemplate is whether a FieldsV1 set has fields under f:spec/f:template.
func ownsTemplate(raw []byte) bool {
	var top struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return false
	}
	_, ok := top.Spec["f:template"]
	return ok
}
