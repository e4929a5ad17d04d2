#!/usr/bin/env bash
# Proves `make release` reproducible: builds the release twice, into two directories, and
# fails unless every file of the two (binaries, image layout blobs, docker archives, chart,
# SBOM, SHA256SUMS) has the same checksum. Prints each run's time and the artefacts' sizes.
# Usage: hack/release-check.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

work="${1:-_output/release-check}"
rm -rf "$work"
mkdir -p "$work"
for run in a b; do
	start=$(date +%s)
	bash hack/release.sh "$work/$run" >"$work/$run.log"
	echo "release run $run: $(($(date +%s) - start))s (log: $work/$run.log)"
	(cd "$work/$run" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$work/$run.sums"
done
grep '^image ' "$work/a.log"
echo "files compared: $(wc -l <"$work/a.sums")"
if ! diff -u "$work/a.sums" "$work/b.sums"; then
	echo "release-check: the two runs differ" >&2
	exit 1
fi
echo "release-check: the two runs are identical"
cat "$work/a/SHA256SUMS"
