// Package releaseversion holds the test of hack/release-version.sh, the version `make
// release` stamps on binaries, the image and the chart: run in a clone of this repository,
// it must mark any change to what is built, untracked files included, as dirty.
package releaseversion
