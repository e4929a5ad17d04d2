// Command release assembles holdfast's release artefacts from binaries `make release`
// has already built, without a container runtime:
//
//	release image  -bin-dir DIR -out DIR -version V -revision SHA -created RFC3339 [-base REF|none]
//	release chart  -chart DIR -out DIR -version V -created RFC3339
//	release verify -dir DIR -version V -revision SHA -created RFC3339
//	release push   -layout DIR -image REPO:TAG [-digest-file FILE]
//
// image writes a multi-arch OCI image layout (linux/amd64, linux/arm64) and, per
// architecture, a docker-archive tarball that `kind load image-archive` reads. chart
// packages the Helm chart with Helm's own library, version and appVersion set to the
// release. Every timestamp is the commit's, so two runs on one commit write the same
// bytes. verify reads back what image and chart wrote and checks the promises the docs
// make of them. It is its own module so go-containerregistry never enters holdfast's go.mod.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// The image's fixed shape: the binary at /holdfast, run as the distroless "nonroot" user.
const (
	entrypoint = "/holdfast"
	user       = "65532:65532"
	// refName names the index inside the layout (`skopeo copy oci:DIR:<version>`, crane).
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release image|chart|verify|push [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "image":
		err = imageCmd(os.Args[2:])
	case "chart":
		err = chartCmd(os.Args[2:])
	case "verify":
		err = verifyCmd(os.Args[2:])
	case "push":
		err = pushCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// meta is what every artefact is stamped with.
type meta struct {
	version  string // as git describe says it, e.g. v0.1.0
	revision string
	created  time.Time
	source   string
}

// tag is the image tag and chart version: the version without its "v", which is the
// chart's appVersion and so the tag its Deployment pulls by default.
func (m meta) tag() string { return strings.TrimPrefix(m.version, "v") }

func parseCreated(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-created: %w", err)
	}
	return t.UTC(), nil
}

func imageCmd(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	binDir := fs.String("bin-dir", "", "directory holding holdfast-linux-<arch>")
	out := fs.String("out", "", "directory to write the layout (oci/) and the docker archives into")
	repo := fs.String("repository", "ghcr.io/holdfast-dev/holdfast", "repository named in the docker archives")
	base := fs.String("base", "none", `base image by digest, or "none" for an empty base`)
	var m meta
	created := fs.String("created", "", "commit time, RFC 3339")
	fs.StringVar(&m.version, "version", "", "release version")
	fs.StringVar(&m.revision, "revision", "", "commit")
	fs.StringVar(&m.source, "source", "https://github.com/holdfast-dev/holdfast", "source repository URL")
	_ = fs.Parse(args)
	var err error
	if m.created, err = parseCreated(*created); err != nil {
		return err
	}
	if *binDir == "" || *out == "" || m.version == "" || m.revision == "" {
		return errors.New("image needs -bin-dir, -out, -version and -revision")
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	for _, p := range platforms {
		baseImg, desc, err := baseImage(*base, p)
		if err != nil {
			return err
		}
		fmt.Printf("image %s/%s: base: %s\n", p.OS, p.Architecture, desc)
		img, err := buildImage(filepath.Join(*binDir, "holdfast-"+p.OS+"-"+p.Architecture), baseImg, p, m)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", p.OS, p.Architecture, err)
		}
		if err := report(img, p); err != nil {
			return err
		}
		plat := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat}})
		images[p.Architecture] = img
	}
	idx = mutate.Annotations(idx, labels(m)).(v1.ImageIndex)

	dir := filepath.Join(*out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: m.tag()})); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image index %s in %s (tag %s)\n", d, dir, m.tag())

	// kind and docker load a single-platform docker archive, not an OCI layout.
	tag, err := name.NewTag(*repo + ":" + m.tag())
	if err != nil {
		return err
	}
	for _, p := range platforms {
		path := filepath.Join(*out, fmt.Sprintf("holdfast-image-%s-%s.tar", p.OS, p.Architecture))
		if err := tarball.WriteToFile(path, tag, images[p.Architecture]); err != nil {
			return err
		}
	}
	return nil
}

// baseImage returns the image to build on for p and how the build output names it.
func baseImage(ref string, p v1.Platform) (v1.Image, string, error) {
	if ref == "" || ref == "none" {
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		return img, "none (empty), distroless not reachable offline", nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, "", err
	}
	if _, ok := r.(name.Digest); !ok {
		return nil, "", fmt.Errorf("base %s: pin it by digest (…@sha256:…) so two builds use the same base", ref)
	}
	img, err := remote.Image(r, remote.WithPlatform(p), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, "", fmt.Errorf("base %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, "", err
	}
	return img, fmt.Sprintf("%s (%s/%s manifest %s)", ref, p.OS, p.Architecture, d), nil
}

func labels(m meta) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   m.source,
		"org.opencontainers.image.version":  m.tag(),
		"org.opencontainers.image.revision": m.revision,
		"org.opencontainers.image.created":  m.created.Format(time.RFC3339),
		"org.opencontainers.image.title":    "holdfast",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// buildImage adds one layer, the binary at /holdfast owned by root and executable by all,
// to base, and sets what runs it: the entrypoint, the non-root user, the labels.
func buildImage(binary string, base v1.Image, p v1.Platform, m meta) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg, Name: strings.TrimPrefix(entrypoint, "/"), Mode: 0o755,
		Size: int64(len(bin)), ModTime: m.created, Format: tar.FormatPAX,
	}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}

	cf, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Cmd = nil
	cf.Config.User = user
	cf.Config.WorkingDir = "/"
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range labels(m) {
		cf.Config.Labels[k] = v
	}
	img, err := mutate.ConfigFile(base, cf)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: m.created},
			CreatedBy: "hack/release image: COPY holdfast-" + p.OS + "-" + p.Architecture + " " + entrypoint,
			Comment:   "holdfast " + m.version,
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: m.created})
}

// report prints the sizes the docs quote: the compressed layer pulled per architecture.
func report(img v1.Image, p v1.Platform) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var compressed int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return err
		}
		compressed += s
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image %s/%s: manifest %s, %d layer(s), %d bytes compressed\n", p.OS, p.Architecture, d, len(layers), compressed)
	return nil
}

func chartCmd(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ExitOnError)
	dir := fs.String("chart", "charts/holdfast", "chart directory")
	out := fs.String("out", "", "directory to write the .tgz into")
	version := fs.String("version", "", "release version (a leading v is dropped)")
	created := fs.String("created", "", "commit time, RFC 3339")
	_ = fs.Parse(args)
	t, err := parseCreated(*created)
	if err != nil {
		return err
	}
	if *out == "" || *version == "" {
		return errors.New("chart needs -out and -version")
	}
	ch, err := loader.Load(*dir)
	if err != nil {
		return err
	}
	// The chart and the image it installs by default move together: the Deployment pulls
	// image.tag, which defaults to appVersion.
	v := strings.TrimPrefix(*version, "v")
	ch.Metadata.Version = v
	ch.Metadata.AppVersion = v
	path, err := chartutil.Save(ch, *out)
	if err != nil {
		return err
	}
	if err := normalizeTgz(path, t); err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Printf("chart %s: version %s, appVersion %s, %d bytes\n", path, v, v, st.Size())
	return nil
}

// normalizeTgz rewrites a chart archive Helm wrote with every entry's time set to t
// (Helm stamps them with the time of packaging), in the same order, so that two
// packagings of one commit are the same bytes.
func normalizeTgz(path string, t time.Time) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return err
	}
	// Keep Helm's gzip header fields, which `helm` itself writes; only the time goes.
	zw.Header.Extra, zw.Header.Comment = zr.Header.Extra, zr.Header.Comment
	tr := tar.NewReader(zr)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = t, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		h.PAXRecords = nil
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

func pushCmd(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "", "OCI layout written by `release image`")
	image := fs.String("image", "", "where to push, REPOSITORY:TAG")
	digestFile := fs.String("digest-file", "", "file to write the pushed index's digest into (for signing)")
	_ = fs.Parse(args)
	if *dir == "" || *image == "" {
		return errors.New("push needs -layout and -image")
	}
	ref, err := name.ParseReference(*image)
	if err != nil {
		return err
	}
	outer, im, err := readLayout(*dir)
	if err != nil {
		return err
	}
	var found []string
	for _, d := range im.Manifests {
		found = append(found, d.Annotations[refNameAnnotation])
		if d.MediaType != types.OCIImageIndex {
			continue
		}
		idx, err := outer.ImageIndex(d.Digest)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref, d.Digest)
		if *digestFile != "" {
			return os.WriteFile(*digestFile, []byte(d.Digest.String()+"\n"), 0o644)
		}
		return nil
	}
	sort.Strings(found)
	return fmt.Errorf("%s holds no image index (found %v)", *dir, found)
}

// readLayout opens the OCI image layout in dir: its outer index and that index's manifest.
func readLayout(dir string) (v1.ImageIndex, *v1.IndexManifest, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, err
	}
	outer, err := lp.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	im, err := outer.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	return outer, im, nil
}
