package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// ArgPath is where a flag's value sits on a command line: in the command or the args, at
// an index.
type ArgPath struct {
	Name  string // "command" or "args"
	Index int
}

// FlagValue reads a flag from a container's command line, accepting "--flag=v" and
// "--flag v". As with most flag parsers, the last occurrence wins.
func FlagValue(command, args []string, flag string) (value string, at ArgPath, found bool) {
	for _, part := range []struct {
		name string
		argv []string
	}{{"command", command}, {"args", args}} {
		for i, a := range part.argv {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				value, at, found = v, ArgPath{part.name, i}, true
			} else if a == flag && i+1 < len(part.argv) {
				value, at, found = part.argv[i+1], ArgPath{part.name, i + 1}, true
			}
		}
	}
	return value, at, found
}

// Shape is the fingerprint of the template with the values of the given flags blanked (the
// occurrence each is read from): two templates of one shape differ at most in those flags,
// so a change between them that follows spec.replicas is a scale, not a revision
// (argsMatchReplicas). Without flags it is the template's fingerprint.
func (t *Template) Shape(flags []v1alpha1.ArgMatchesReplicas) (string, error) {
	spec, err := t.Spec()
	if err != nil {
		return "", err
	}
	if len(flags) == 0 {
		return Fingerprint(spec)
	}
	blank := spec.DeepCopy()
	for _, f := range flags {
		for i := range blank.Spec.Containers {
			c := &blank.Spec.Containers[i]
			if c.Name != f.Container {
				continue
			}
			// Only the occurrence the flag's value is read from (the last, FlagValue): another
			// one is no value that follows the replicas, and a change to it is a revision.
			_, at, found := FlagValue(c.Command, c.Args, f.Flag)
			if !found {
				continue
			}
			argv := c.Command
			if at.Name == "args" {
				argv = c.Args
			}
			if strings.HasPrefix(argv[at.Index], f.Flag+"=") {
				argv[at.Index] = f.Flag + "=*"
			} else {
				argv[at.Index] = "*"
			}
		}
	}
	return Fingerprint(blank)
}

// Sum is the template's fingerprint as the cache records it (FingerprintAnnotation's
// value); false when it cannot be computed (a template that does not decode).
func (t *Template) Sum() (string, bool) {
	if t.hex != "" {
		return t.hex, true
	}
	if !t.fingerprint() && !t.computeFingerprint() {
		return "", false
	}
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], t.sum[:])
	t.hex = string(buf[:])
	return t.hex, true
}

// SumIs is whether Sum is sum, without encoding a fingerprint that is not yet: the
// template an UPDATE replaces is compared with recorded ones, its own never asked for.
func (t *Template) SumIs(sum string) bool {
	if t.hex != "" {
		return t.hex == sum
	}
	if !t.fingerprint() && !t.computeFingerprint() {
		return false
	}
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], t.sum[:])
	return string(buf[:]) == sum
}
