package informer

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func entry(manager string, op metav1.ManagedFieldsOperationType, subresource string, minute int, fields string) metav1.ManagedFieldsEntry {
	at := metav1.NewTime(time.Date(2026, 12, 1, 12, minute, 0, 0, time.UTC))
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource, APIVersion: "apps/v1", Time: &at,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// updated is an Update of the object itself (no subresource).
func updated(manager string, minute int, fields string) metav1.ManagedFieldsEntry {
	return entry(manager, metav1.ManagedFieldsOperationUpdate, "", minute, fields)
}

// after lists first and the entries that follow it.
func after(first metav1.ManagedFieldsEntry, then ...metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return append([]metav1.ManagedFieldsEntry{first}, then...)
}

const (
	templateFields = `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}}}}}}}`
	replicasFields = `{"f:spec":{"f:replicas":{}}}`
	statusFields   = `{"f:status":{"f:replicas":{},"f:conditions":{}}}`
	// annotationOnly has f:template under metadata.annotations only: no template field.
	annotationOnly = `{"f:metadata":{"f:annotations":{"f:template":{}}}}`
)

// TestTemplateWriter: the newest entry that owns a field under spec.template, by Update or
// Apply on the object itself, is the template's last writer.
func TestTemplateWriter(t *testing.T) {
	operatorA := updated("operator-a", 1, templateFields)
	gitopsB := entry("gitops-b", metav1.ManagedFieldsOperationApply, "", 3, templateFields)
	// Each case but the first two follows operator-a's template write with others.
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{name: "none", want: ""},
		{name: "order in the list does not matter", entries: []metav1.ManagedFieldsEntry{gitopsB, operatorA}, want: "gitops-b"},
		{name: "one writer", entries: after(operatorA), want: "operator-a"},
		{name: "the newer of two that own template fields", entries: after(operatorA, gitopsB), want: "gitops-b"},
		{name: "a newer scale or status writer owns no template field", entries: after(operatorA,
			updated("hpa", 5, replicasFields),
			entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", 6, statusFields),
			entry("kubectl", metav1.ManagedFieldsOperationUpdate, "scale", 7, replicasFields)), want: "operator-a"},
		{name: "f:template outside f:spec is not the template", entries: after(operatorA, updated("annotator", 5, annotationOnly)), want: "operator-a"},
		{name: "a template field on a subresource is not the object's",
			entries: after(operatorA, entry("odd", metav1.ManagedFieldsOperationUpdate, "status", 5, templateFields)), want: "operator-a"},
		{name: "fields that do not decode own nothing", entries: after(operatorA, updated("broken", 5, `{"f:spec":{"f:template":`)), want: "operator-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TemplateWriter(tc.entries); got != tc.want {
				t.Errorf("TemplateWriter = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestOptionsKeepTheTemplateWriter: the workload transform keeps the writer by UID and
// still strips the managed fields from what the cache holds; a nil Writers keeps nothing.
func TestOptionsKeepTheTemplateWriter(t *testing.T) {
	writers := NewWriters()
	keep := func(o any) (any, error) { return o, nil }
	opts := Options(keep, keep, "holdfast-system", nil, writers)
	var transform func(any) (any, error)
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*appsv1.Deployment); ok {
			transform = by.Transform
		}
	}
	if transform == nil {
		t.Fatal("no transform for Deployments")
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kas", UID: "u1", ManagedFields: []metav1.ManagedFieldsEntry{
		updated("operator-a", 1, templateFields)},
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"kind":"Deployment"}`, "deployment.kubernetes.io/revision": "3"}}}
	got, err := transform(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.(*appsv1.Deployment).ManagedFields) != 0 {
		t.Error("the cached Deployment keeps its managed fields")
	}
	if a := got.(*appsv1.Deployment).Annotations; len(a) != 1 || a["deployment.kubernetes.io/revision"] != "3" {
		t.Errorf("the cached Deployment's annotations %v: want kubectl's last-applied configuration dropped and the others kept", a)
	}
	if w := writers.Get("u1"); w != "operator-a" {
		t.Errorf("writer %q, want operator-a", w)
	}
	// The transform sees the object again, stripped (an informer's first list, streamed as
	// a watch, passes each object through it twice): the writer stays.
	if _, err := transform(got); err != nil {
		t.Fatal(err)
	}
	if w := writers.Get("u1"); w != "operator-a" {
		t.Errorf("writer %q after a second look at the stripped object, want operator-a", w)
	}
	// An update whose managed fields own no template field forgets the writer: it is not
	// known any more, and nothing stale stands in for it.
	if _, err := transform(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kas", UID: "u1",
		ManagedFields: []metav1.ManagedFieldsEntry{updated("hpa", 2, replicasFields)}}}); err != nil {
		t.Fatal(err)
	}
	if w := writers.Get("u1"); w != "" || writers.Len() != 0 {
		t.Errorf("writer %q, %d kept; want none", w, writers.Len())
	}
	var none *Writers
	none.record(d)
	if none.Get("u1") != "" {
		t.Error("a nil Writers keeps a writer")
	}
}
