// Package version reports the build's version, stamped at link time with
// -ldflags "-X github.com/holdfast-dev/holdfast/internal/version.Version=…" (and, by
// `make release`, "-X …/version.Revision=<commit>").
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release this binary was built from; "dev" for untagged builds.
var Version = "dev"

// Revision is the commit this binary was built from, stamped by `make release`, which
// builds with -buildvcs=false so that two builds of one commit are the same bytes; when
// empty, the VCS stamp of a plain `go build` stands in.
var Revision = ""

// String describes the build in one line: version, VCS revision when known, Go version and platform.
func String() string {
	return fmt.Sprintf("holdfast %s (revision %s, %s, %s/%s)", Version, revision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func revision() string {
	if Revision != "" {
		return Revision
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
