#!/usr/bin/env bash
# Builds holdfast's release artefacts offline into one directory (make release):
#   holdfast-<os>-<arch>            static binaries, linux and darwin on amd64 and arm64
#   oci/                            multi-arch OCI image layout (linux/amd64, linux/arm64)
#   holdfast-image-linux-<arch>.tar docker archives of the same images (kind load image-archive)
#   holdfast-<version>.tgz          the Helm chart, version and appVersion = the release's
#   holdfast.cdx.json               CycloneDX SBOM of the binary's modules (linux/amd64)
#   SHA256SUMS                      checksums of all of the above (the layout by its index.json)
# Every timestamp is the commit's, so two runs on one commit write the same bytes
# (hack/release-check.sh proves it). Usage: hack/release.sh [OUT_DIR]
# Environment: BASE_IMAGE ("none", or a base pinned by digest, which needs its registry),
# RELEASE_VERSION (default: from git describe), CYCLONEDX_GOMOD (the pinned SBOM tool).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-_output/release}"
base="${BASE_IMAGE:-none}"
cyclonedx="${CYCLONEDX_GOMOD:-github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0}"
pkg=github.com/holdfast-dev/holdfast/internal/version

commit=$(git rev-parse HEAD)
epoch=$(git log -1 --format=%ct HEAD)
created=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
RELEASE_VERSION="${RELEASE_VERSION:-$(bash hack/release-version.sh)}"
echo "release ${RELEASE_VERSION} (commit ${commit}, ${created}) into ${out}"

rm -rf "$out"
mkdir -p "$out"
export CGO_ENABLED=0 SOURCE_DATE_EPOCH="$epoch"
# -buildvcs=false: the commit goes in by -X, and a VCS stamp would differ between a clean
# tree and one with untracked files; -trimpath: no build-machine paths in the binary.
ldflags="-s -w -X ${pkg}.Version=${RELEASE_VERSION} -X ${pkg}.Revision=${commit}"
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
	os=${platform%/*} arch=${platform#*/}
	GOOS=$os GOARCH=$arch go build -buildvcs=false -trimpath -ldflags "$ldflags" -o "$out/holdfast-$os-$arch" ./cmd/holdfast
	touch -d "@$epoch" "$out/holdfast-$os-$arch"
done

# The image, chart and push tool is its own module (hack/release/go.mod): its
# go-containerregistry stays out of holdfast's dependencies.
tool="_output/bin/release"
go build -C hack/release -buildvcs=false -trimpath -o "$PWD/$tool" .
"$tool" image -bin-dir "$out" -out "$out" -version "$RELEASE_VERSION" -revision "$commit" -created "$created" -base "$base"
"$tool" chart -chart charts/holdfast -out "$out" -version "$RELEASE_VERSION" -created "$created"
"$tool" verify -dir "$out" -version "$RELEASE_VERSION" -revision "$commit" -created "$created"

# The SBOM of what the linux/amd64 binary links (the other platforms differ only in
# golang.org/x/sys files, not in modules); no serial number or timestamp, so it is reproducible.
GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false go run "$cyclonedx" app -json -licenses -noserial -notimestamp \
	-main cmd/holdfast -output "$out/holdfast.cdx.json" .

(
	cd "$out"
	sha256sum holdfast-* holdfast.cdx.json oci/index.json | sort -k2 >SHA256SUMS
)
find "$out" -exec touch -h -d "@$epoch" {} +

echo
echo "artefacts (bytes):"
(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%s\t%P\n' | sort -k2)
