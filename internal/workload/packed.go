package workload

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// PackedTemplateAnnotation is set by holdfast's cache (never in the cluster) on
// Deployments, StatefulSets and DaemonSets to their pod template: its JSON, compressed
// with DEFLATE, in base64. The typed template keeps its metadata (labels and annotations,
// which selections read) and drops its spec. A template's typed form is its workload's
// largest part, and only a few decisions read the spec of a workload the cache holds (the
// recorder's shapes, the background audit, a scale, a namespace bringing workloads into a
// selection): From unpacks it for them.
const PackedTemplateAnnotation = "holdfast.dev/template-deflate"

// Pack is the cache transform for Deployments, StatefulSets and DaemonSets: it records the
// template's fingerprint (FingerprintAnnotation) and packs its spec into
// PackedTemplateAnnotation. Other objects, and a template that does not encode, pass
// unchanged.
func Pack(obj any) (any, error) {
	f, ok := fieldsOf(obj)
	if !ok || f.template.Spec.Containers == nil { // packed already, or nothing to pack
		return obj, nil
	}
	raw, err := json.Marshal(f.template)
	if err != nil {
		return obj, nil // kept typed: From reads it as it is
	}
	sum, err := Fingerprint(f.template)
	if err != nil {
		return obj, nil
	}
	packed, err := deflate(raw)
	if err != nil {
		return obj, nil
	}
	// A copy: the object's own map may be shared with another's.
	annotations := make(map[string]string, len(f.meta.Annotations)+2)
	maps.Copy(annotations, f.meta.Annotations)
	f.meta.Annotations = annotations
	f.meta.Annotations[FingerprintAnnotation] = sum
	f.meta.Annotations[PackedTemplateAnnotation] = packed
	f.template.Spec = corev1.PodSpec{}
	return obj, nil
}

// packedTemplate is the template Pack packed into obj, known by its JSON and fingerprint;
// nil when obj has none packed.
func packedTemplate(obj any) (*Template, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	packed := m.GetAnnotations()[PackedTemplateAnnotation]
	if packed == "" {
		return nil, nil
	}
	raw, err := inflate(packed)
	if err != nil {
		return nil, fmt.Errorf("reading the pod template the cache packed: %w", err)
	}
	t := new(Template).Wrap(nil, m.GetAnnotations()[FingerprintAnnotation])
	t.raw = raw
	return t, nil
}

var (
	writers = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, flate.DefaultCompression)
		return w
	}}
	readers = sync.Pool{New: func() any { return flate.NewReader(strings.NewReader("")) }}
)

func deflate(raw []byte) (string, error) {
	var buf bytes.Buffer
	w := writers.Get().(*flate.Writer)
	defer writers.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(raw); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func inflate(packed string) ([]byte, error) {
	compressed, err := base64.StdEncoding.DecodeString(packed)
	if err != nil {
		return nil, err
	}
	r := readers.Get().(io.ReadCloser)
	defer readers.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(compressed), nil); err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
