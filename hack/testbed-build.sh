#!/usr/bin/env bash
# Builds the test bed's control-plane binaries from source through the Go module
# proxy and caches them by version outside the checkout:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes)
#   etcd (go.etcd.io/etcd/server/v3)
#   kwok, kwokctl (sigs.k8s.io/kwok)
# Each binary is rebuilt only when it is missing. Prints the bin directory last.
set -euo pipefail

# shellcheck source=hack/testbed-env.sh
source "$(dirname "$0")/testbed-env.sh"

# Staging modules (k8s.io/api, …) are versioned v0.<minor>.<patch> for kubernetes v1.<minor>.<patch>.
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"

CACHE="$HOLDFAST_CACHE"
BIN="$TESTBED_BIN"
WORK="$CACHE/testbed/src"
mkdir -p "$BIN" "$WORK"

log() { printf 'testbed: %s\n' "$*" >&2; }

missing() {
	local b
	for b in "$@"; do [ -x "$BIN/$b" ] || return 0; done
	return 1
}

# build_kube writes a throwaway module that requires k8s.io/kubernetes and pins every
# staging module its go.mod replaces with a local path to the matching tagged version.
build_kube() {
	local dir="$WORK/kube-$KUBE_VERSION"
	mkdir -p "$dir"
	cd "$dir"
	log "resolving k8s.io/kubernetes@$KUBE_VERSION"
	local gomod
	gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	{
		echo "module holdfast.dev/testbed/kube"
		echo
		echo "go 1.26"
		echo
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		echo
		sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => \./staging/.*#replace \1 => \1 '"$STAGING_VERSION"'#p' "$gomod"
	} >go.mod

	local name
	for name in kube-apiserver kube-controller-manager kube-scheduler kubectl; do mkdir -p "cmd/$name"; done
	cat >cmd/kube-apiserver/main.go <<'EOF'
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
EOF
	cat >cmd/kube-controller-manager/main.go <<'EOF'
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
EOF
	cat >cmd/kube-scheduler/main.go <<'EOF'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() { os.Exit(cli.Run(app.NewSchedulerCommand())) }
EOF
	cat >cmd/kubectl/main.go <<'EOF'
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
EOF
	log "go mod tidy (kubernetes $KUBE_VERSION)"
	go mod tidy >/dev/null

	local minor="${KUBE_VERSION#v1.}"
	minor="${minor%%.*}"
	local ldflags="-s -w"
	local pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	for name in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
		if [ ! -x "$BIN/$name" ]; then
			log "building $name $KUBE_VERSION"
			go build -trimpath -ldflags "$ldflags" -o "$BIN/$name.tmp" "./cmd/$name"
			mv "$BIN/$name.tmp" "$BIN/$name"
		fi
	done
}

build_etcd() {
	local dir="$WORK/etcd-$ETCD_VERSION"
	mkdir -p "$dir/cmd/etcd"
	cd "$dir"
	cat >go.mod <<EOF
module holdfast.dev/testbed/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
	cat >cmd/etcd/main.go <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
	log "go mod tidy (etcd $ETCD_VERSION)"
	go mod tidy >/dev/null
	log "building etcd $ETCD_VERSION"
	go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" -o "$BIN/etcd.tmp" ./cmd/etcd
	mv "$BIN/etcd.tmp" "$BIN/etcd"
}

build_kwok() {
	log "building kwok, kwokctl $KWOK_VERSION"
	local tmp="$WORK/kwok-$KWOK_VERSION-bin"
	mkdir -p "$tmp"
	GOBIN="$tmp" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
		"sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
	mv "$tmp/kwok" "$BIN/kwok"
	mv "$tmp/kwokctl" "$BIN/kwokctl"
}

if missing etcd; then build_etcd; fi
if missing kwok kwokctl; then build_kwok; fi
if missing kube-apiserver kube-controller-manager kube-scheduler kubectl; then build_kube; fi

# kwokctl's stage configs come from the kwok module itself, so the version matches the controller.
STAGES="$TESTBED_STAGES"
if [ ! -d "$STAGES" ]; then
	src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
	mkdir -p "$STAGES.tmp"
	cp -r "$src/kustomize/stage/." "$STAGES.tmp/"
	chmod -R u+w "$STAGES.tmp"
	mv "$STAGES.tmp" "$STAGES"
fi

log "binaries in $BIN"
echo "$BIN"
