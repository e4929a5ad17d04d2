# holdfast — run `make help` for the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG ?= holdfast:$(VERSION)
LDFLAGS := -s -w -X github.com/holdfast-dev/holdfast/internal/version.Version=$(VERSION)

CONTROLLER_GEN := go tool controller-gen
# Where the test bed's binaries are cached (see hack/testbed-env.sh).
TESTBED_BIN = $(shell source hack/testbed-env.sh && echo $$TESTBED_BIN)

GO_TEST_FLAGS ?=
FUZZTIME ?= 30s
FAULTS_FLAGS ?=

##@ Build

.PHONY: build
build: ## Build bin/holdfast.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/holdfast ./cmd/holdfast

.PHONY: docker-build
docker-build: ## Build the container image $(IMG) from the Dockerfile (needs a Docker engine; `make release` needs none).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

##@ Release

RELEASE_DIR ?= _output/release
# The image's base. "none" (the default) builds on an empty base: the binary alone, which
# is what a machine without a registry can build. "distroless" (CI) builds on
# DISTROLESS_IMAGE, pinned by digest and pulled from its registry. The digest cannot be
# checked offline: refresh it with `crane digest gcr.io/distroless/static-debian12:nonroot`.
BASE_IMAGE ?= none
DISTROLESS_IMAGE := gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
RELEASE_BASE = $(if $(filter distroless,$(BASE_IMAGE)),$(DISTROLESS_IMAGE),$(BASE_IMAGE))

.PHONY: release
release: ## Build the release offline into RELEASE_DIR: binaries (linux, darwin; amd64, arm64), multi-arch OCI image layout, docker archives, chart, SBOM, SHA256SUMS.
	BASE_IMAGE="$(RELEASE_BASE)" bash hack/release.sh $(RELEASE_DIR)

.PHONY: release-check
release-check: ## Build the release twice and fail unless every artefact is the same bytes.
	BASE_IMAGE="$(RELEASE_BASE)" bash hack/release-check.sh

.PHONY: release-version
release-version: ## Print the release's image tag and chart version (git describe, without the v).
	@bash hack/release-version.sh -t

.PHONY: docker-push
docker-push: ## Push the image layout of `make release` to IMG=<registry>/<repo>:<tag> (login from ~/.docker/config.json; no Docker engine needed).
	@case "$(IMG)" in */*) ;; *) echo "docker-push: set IMG to a registry's repository and tag, e.g. IMG=ghcr.io/you/holdfast:0.1.0"; exit 1;; esac
	go build -C hack/release -buildvcs=false -trimpath -o $(CURDIR)/_output/bin/release .
	_output/bin/release push -layout $(RELEASE_DIR)/oci -image $(IMG) $(if $(DIGEST_FILE),-digest-file $(DIGEST_FILE))

##@ Generate and check

.PHONY: manifests
manifests: ## Generate the CRDs, RBAC and webhook manifests from the code's markers, the copies of the CRDs (chart, internal/validation) and READMEs.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/crdbounds
	rm -f internal/validation/crds/*.yaml && cp config/crd/bases/*.yaml internal/validation/crds/
	$(CONTROLLER_GEN) rbac:roleName=holdfast paths=./... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./... output:webhook:artifacts:config=config/webhook
	go run ./hack/chartgen
	go run ./hack/docgen
	go tool helm-docs --chart-search-root charts --log-level warning

.PHONY: generate
generate: manifests ## Generate the deep-copy code and every manifest.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: verify
verify: generate ## Regenerate, then fail on any diff; chart and kustomize agree; gofmt and go vet.
	git diff --exit-code -- api config charts docs internal/validation/crds
	@test -z "$$(git status --porcelain -- api config charts docs internal/validation/crds)" || { git status --porcelain -- api config charts docs internal/validation/crds; echo "generated files are not committed"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...
	go vet -tags integration,e2e,promtool ./...
	go test -count=1 -run '^TestChartAgreesWithKustomize$$' ./charts/

.PHONY: lint
lint: ## gofmt and go vet over every build tag (and hack/release's module), helm lint (Helm's library), actionlint on .github/workflows (its library), the alerts' promtool tests (pinned promtool, built once), and shellcheck on hack/ when installed.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet -tags integration,e2e,promtool ./...
	go test -count=1 -run '^TestLint$$' ./charts/
	go vet -C hack/release ./...
	go test -count=1 ./hack/workflows/
	promtool="$$(bash hack/promtool.sh)"; PROMTOOL="$$promtool" go test -tags promtool -count=1 -run '^TestAlertRules$$' ./charts/
	@if command -v shellcheck >/dev/null; then shellcheck -x hack/*.sh .ci/run; else echo "shellcheck not installed: skipped"; fi

##@ Test

.PHONY: test
test: ## Run every test layer: unit, integration, e2e (what CI runs), then the totals.
	@rm -f _output/summary-*.txt; rc=0; for layer in unit integration e2e; do $(MAKE) --no-print-directory test-$$layer || rc=1; done; \
	cat _output/summary-*.txt 2>/dev/null | awk '{p+=$$2; f+=$$4; s+=$$6} END {printf "total: %d passed, %d failed, %d skipped\n", p, f, s}'; \
	exit $$rc

.PHONY: test-unit
test-unit: ## Unit tests of pure logic, with the fuzz seed corpora.
	bash hack/test-layer.sh unit $(GO_TEST_FLAGS) -count=1 ./...

.PHONY: test-integration
test-integration: testbed ## Integration tests: envtest with the real kube-apiserver and etcd calling holdfast's webhooks.
	KUBEBUILDER_ASSETS="$(TESTBED_BIN)" bash hack/test-layer.sh integration $(GO_TEST_FLAGS) -tags integration -count=1 ./test/integration/...

.PHONY: test-e2e
test-e2e: testbed ## End-to-end tests on a kwok cluster (real control plane, fake nodes).
	TESTBED_BIN="$(TESTBED_BIN)" KWOKCTL_CONFIG="$$(bash hack/testbed-config.sh)" bash hack/test-layer.sh e2e $(GO_TEST_FLAGS) -tags e2e -count=1 -timeout 25m ./e2e/...

.PHONY: bench
bench: testbed ## Go benchmarks and the load harness (serving, API server comparison, memory): BENCH lines.
	bash hack/bench.sh

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s) and the model explorers long (MODEL_SEQUENCES, default 50000); their seeds run in `make test`.
	bash hack/fuzz.sh $(FUZZTIME)

.PHONY: test-faults
test-faults: testbed build ## Fault injection (restarts, SIGKILL, failover, cert rotation, API server outage, webhooks down) under load, and a drain storm on a kwok cluster: RELIABILITY lines.
	KUBEBUILDER_ASSETS="$(TESTBED_BIN)" TESTBED_BIN="$(TESTBED_BIN)" KWOKCTL_CONFIG="$$(bash hack/testbed-config.sh)" go run ./test/faults $(FAULTS_FLAGS)

##@ Run

.PHONY: testbed
testbed: ## Build (once, cached by version) the control-plane, etcd and kwok binaries from source.
	bash hack/testbed-build.sh

.PHONY: testbed-up
testbed-up: ## Start the local kwok cluster (NODES=4).
	bash hack/testbed-up.sh $${NODES:-4}

.PHONY: testbed-down
testbed-down: ## Stop and delete the local kwok cluster.
	bash hack/testbed-down.sh

.PHONY: run
run: ## Run holdfast against the local kwok cluster, webhooks called by URL (Ctrl-C stops it).
	go run ./test/devcluster run

.PHONY: demo
demo: testbed ## Start the local cluster, run holdfast against it and show what it does.
	go run ./test/devcluster demo

##@ Help

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)
