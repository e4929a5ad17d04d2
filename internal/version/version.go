// Package version reports the build's version, stamped at link time with
// -ldflags "-X github.com/holdfast-dev/holdfast/internal/version.Version=…".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release this binary was built from; "dev" for untagged builds.
var Version = "dev"

// String describes the build in one line: version, VCS revision when known, Go version and platform.
func String() string {
	rev := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	return fmt.Sprintf("holdfast %s (revision %s, %s, %s/%s)", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
