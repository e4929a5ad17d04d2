# holdfast image: a static binary on distroless, running as non-root.
# Build: make docker-build (needs a Docker engine). For several architectures, with buildx:
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/holdfast:<tag> --push .
# The builder runs on the build machine's platform and cross-compiles (no emulation).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module cache layer.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY webhooks/ webhooks/
ARG VERSION=dev
# BuildKit sets them from --platform (the engine's own platform by default); empty, as
# with the legacy builder, builds for the build machine.
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w -X github.com/holdfast-dev/holdfast/internal/version.Version=${VERSION}" -o /out/holdfast ./cmd/holdfast

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/holdfast /holdfast
USER 65532:65532
ENTRYPOINT ["/holdfast"]
