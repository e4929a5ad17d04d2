#!/usr/bin/env bash
# Prints the release version of the checked-out commit, as `make release` stamps it: the
# v-tag git describe finds (v0.2.0, or v0.2.0-3-g<commit> past it); before the first tag,
# the chart's version as a pre-release of this commit (v0.1.0-dev.g<commit>), which Helm
# accepts as semver; "-dirty" when the tree has uncommitted changes, untracked files that
# are not ignored included (a new source file changes the build as much as an edit does;
# git describe --dirty sees only tracked ones). With -t, without the leading v: the image
# tag, chart version and appVersion.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! version=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
	chart_version=$(awk '$1 == "version:" {print $2; exit}' charts/holdfast/Chart.yaml)
	version="v${chart_version}-dev.g$(git rev-parse --short=12 HEAD)"
fi
if [ -n "$(git status --porcelain --untracked-files=normal)" ]; then
	version+="-dirty"
fi
if [ "${1:-}" = "-t" ]; then
	version=${version#v}
fi
echo "$version"
