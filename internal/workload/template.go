package workload

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	sigsjson "sigs.k8s.io/json"
)

// Template is a pod template known by its JSON, its typed form, or both.
//
// The rollout webhook reads templates from the request as the JSON the API server sent and
// decodes them only when a rule reads more than their identity: most decisions compare
// templates, and two templates compare by the SHA-256 of their canonical JSON (the
// encoding/json form of the typed template, without the hash labels kube's controllers
// add), which is how the API server encodes objects for admission and how the cache
// fingerprints revisions (see FingerprintAnnotation).
type Template struct {
	raw   []byte
	typed *corev1.PodTemplateSpec
	err   error
	// sum is the fingerprint, when hasSum.
	sum    [sha256.Size]byte
	hasSum bool
	// hex is sum in hex, once Sum encoded it.
	hex string
	// commands are the containers' command lines, still JSON, when read with raw.
	commands []commandJSON
	// packed is the template as the cache packed it (Pack), until unpack reads it into raw.
	packed string
}

// FromSpec wraps a typed pod template. sum, when not empty, is its known fingerprint
// (FingerprintAnnotation's hex value).
func FromSpec(t *corev1.PodTemplateSpec, sum string) *Template {
	return new(Template).Wrap(t, sum)
}

// Wrap makes t the template FromSpec(spec, sum) returns and returns t: for callers that
// allocate many templates at once, as a workload's revisions are read on every review.
func (t *Template) Wrap(spec *corev1.PodTemplateSpec, sum string) *Template {
	*t = Template{typed: spec}
	t.hasSum = len(sum) == hex.EncodedLen(sha256.Size)
	if t.hasSum {
		_, err := hex.Decode(t.sum[:], []byte(sum))
		t.hasSum = err == nil
		if t.hasSum {
			t.hex = strings.ToLower(sum)
		}
	}
	return t
}

// FromFingerprint is a template known only by its fingerprint (FingerprintAnnotation's
// hex value), as the cache keeps revisions; nil when sum is not a fingerprint.
func FromFingerprint(sum string) *Template {
	t := FromSpec(nil, sum)
	if !t.hasSum {
		return nil
	}
	return t
}

// FromJSON wraps a pod template's JSON as the API server encoded it. The bytes are kept,
// not copied.
func FromJSON(raw []byte) *Template {
	return &Template{raw: raw}
}

// consumed is the JSON value dec read since its unread buffer was before: a slice of the
// input, without the whitespace and separator ahead of the value.
func consumed(before []byte, dec *jsontext.Decoder) []byte {
	return bytes.TrimLeft(before[:len(before)-len(dec.UnreadBuffer())], " \t\r\n:,")
}

// Spec returns the typed template, decoding the JSON on first use. A template known only
// by its fingerprint, or whose JSON does not decode as a pod template, is an error.
func (t *Template) Spec() (*corev1.PodTemplateSpec, error) {
	t.unpack()
	if t.typed == nil && t.err == nil {
		switch {
		case t.raw != nil:
			typed := &corev1.PodTemplateSpec{}
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(t.raw, typed); err != nil {
				t.err = fmt.Errorf("decoding spec.template: %w", err)
			} else {
				t.typed = typed
			}
		case t.hasSum:
			t.err = errors.New("the pod template is known only by its fingerprint")
		default:
			t.typed = &corev1.PodTemplateSpec{}
		}
	}
	return t.typed, t.err
}

// fingerprint reports whether the template's fingerprint is known, computing it when it is
// cheap: from the JSON (one hash), unless the JSON carries a hash label, which the
// fingerprint leaves out.
func (t *Template) fingerprint() bool {
	if !t.hasSum && t.raw != nil && !hasHashLabelKey(t.raw) {
		t.sum, t.hasSum = sha256.Sum256(t.raw), true
	}
	return t.hasSum
}

func hasHashLabelKey(raw []byte) bool {
	for _, k := range hashLabels {
		if bytes.Contains(raw, []byte(k)) {
			return true
		}
	}
	return false
}

// Fingerprint computes the hex fingerprint of a typed template, as the cache stores it
// in FingerprintAnnotation.
func Fingerprint(t *corev1.PodTemplateSpec) (string, error) {
	s, err := fingerprintOf(t)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(s[:]), nil
}

// fingerprintOf is the SHA-256 of a typed template's encoding/json form without the hash
// labels: the API server's encoding of it.
func fingerprintOf(t *corev1.PodTemplateSpec) ([sha256.Size]byte, error) {
	raw, err := json.Marshal(withoutHashLabels(t))
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(raw), nil
}

// FingerprintAnnotation is set by holdfast's cache (never in the cluster) on ReplicaSets,
// ControllerRevisions and workloads to the fingerprint of their pod template.
const FingerprintAnnotation = "holdfast.dev/template-sha256"

// SameTemplate compares two templates, ignoring the hash labels kube adds: by
// fingerprint when both have one at hand; otherwise semantically, unless one is known
// only by its fingerprint, when the other's is computed. Nil equals only nil; a template
// whose JSON does not decode equals only the same JSON.
func SameTemplate(a, b *Template) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a == b {
		return true
	}
	if a.raw != nil && b.raw != nil && bytes.Equal(a.raw, b.raw) {
		return true
	}
	if a.fingerprint() && b.fingerprint() {
		return a.sum == b.sum
	}
	if !a.sumOnly() && !b.sumOnly() {
		as, aErr := a.Spec()
		bs, bErr := b.Spec()
		// A template that does not decode equals no other: a change, for every rule.
		return aErr == nil && bErr == nil && SameSpec(as, bs)
	}
	return a.computeFingerprint() && b.computeFingerprint() && a.sum == b.sum
}

func (t *Template) sumOnly() bool { return t.raw == nil && t.typed == nil && t.packed == "" }

// computeFingerprint fingerprints a typed template the way the cache does, unless its
// fingerprint is known; false if it is not known and cannot be computed.
func (t *Template) computeFingerprint() bool {
	if t.hasSum || t.sumOnly() {
		return t.hasSum
	}
	spec, err := t.Spec()
	if err != nil {
		return false
	}
	sum, err := fingerprintOf(spec)
	if err != nil {
		return false
	}
	t.sum, t.hasSum = sum, true
	return true
}

// SameSpec compares two typed pod templates semantically, ignoring the hash labels kube adds.
func SameSpec(a, b *corev1.PodTemplateSpec) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equality.Semantic.DeepEqual(withoutHashLabels(a), withoutHashLabels(b))
}

// hashLabels are the labels kube's controllers add to a revision's pod template.
var hashLabels = []string{appsv1.DefaultDeploymentUniqueLabelKey, appsv1.ControllerRevisionHashLabelKey}

func withoutHashLabels(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	has := false
	for _, k := range hashLabels {
		_, ok := t.Labels[k]
		has = has || ok
	}
	if !has {
		return t
	}
	c := t.DeepCopy()
	for _, k := range hashLabels {
		delete(c.Labels, k)
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	return c
}

// ContainerFlag is a flag read from a container's command line as FlagValue reads it:
// the container's place in spec.containers and, when Found, the flag's value and where it
// sits.
type ContainerFlag struct {
	Container int
	Value     string
	At        ArgPath
	Found     bool
}

// Flag reads flag from the command line of the named container. While the template is
// still JSON it scans only that container's command and args, allocating nothing but the
// value. ok is false when no container has the name; err is a template that does not
// decode.
func (t *Template) Flag(container, flag string) (f ContainerFlag, ok bool, err error) {
	if t.typed != nil || t.commands == nil {
		return t.typedFlag(container, flag)
	}
	for i, c := range t.commands {
		if string(c.name) != container {
			continue
		}
		f := ContainerFlag{Container: i}
		var value []byte
		for _, part := range [...]struct {
			name string
			argv rawJSON
		}{{"command", c.command}, {"args", c.args}} {
			v, at, found, err := part.argv.flag(flag)
			if err != nil {
				return t.typedFlag(container, flag) // which reports the error
			}
			if found { // the last occurrence wins, args after command
				value, f.At, f.Found = v, ArgPath{part.name, at}, true
			}
		}
		f.Value = string(value)
		return f, true, nil
	}
	return ContainerFlag{}, false, nil
}

func (t *Template) typedFlag(container, flag string) (ContainerFlag, bool, error) {
	spec, err := t.Spec()
	if err != nil {
		return ContainerFlag{}, false, err
	}
	cs := spec.Spec.Containers
	for i := range cs {
		if cs[i].Name == container {
			f := ContainerFlag{Container: i}
			f.Value, f.At, f.Found = FlagValue(cs[i].Command, cs[i].Args, flag)
			return f, true, nil
		}
	}
	return ContainerFlag{}, false, nil
}
