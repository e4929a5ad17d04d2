# holdfast image: a static binary on distroless, running as non-root.
# Build: make docker-build (needs a Docker engine).

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module cache layer.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY webhooks/ webhooks/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/holdfast-dev/holdfast/internal/version.Version=${VERSION}" -o /out/holdfast ./cmd/holdfast

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/holdfast /holdfast
USER 65532:65532
ENTRYPOINT ["/holdfast"]
