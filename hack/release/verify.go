package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// shells are the names no holdfast image may contain, in any directory.
var shells = []string{"sh", "bash", "ash", "dash", "zsh", "busybox"}

// verifyCmd reads a release directory back and fails on the first broken promise: both
// platforms in the layout's index, each image running /holdfast as 65532:65532 with its
// labels and the commit's time, its /holdfast the very binary built for it, no shell
// anywhere in its filesystem, the docker archives the same images, and the chart's
// version and appVersion the release's.
func verifyCmd(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	dir := fs.String("dir", "", "release directory")
	var m meta
	created := fs.String("created", "", "commit time, RFC 3339")
	fs.StringVar(&m.version, "version", "", "release version")
	fs.StringVar(&m.revision, "revision", "", "commit")
	_ = fs.Parse(args)
	var err error
	if m.created, err = parseCreated(*created); err != nil {
		return err
	}
	outer, om, err := readLayout(filepath.Join(*dir, "oci"))
	if err != nil {
		return err
	}
	if len(om.Manifests) != 1 || om.Manifests[0].Annotations[refNameAnnotation] != m.tag() || om.Manifests[0].MediaType != types.OCIImageIndex {
		return fmt.Errorf("layout: want one image index named %s, got %+v", m.tag(), om.Manifests)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var got []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("index: manifest %s has no platform", d.Digest)
		}
		p := *d.Platform
		got = append(got, p.OS+"/"+p.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		if err := verifyImage(img, p, filepath.Join(*dir, "holdfast-"+p.OS+"-"+p.Architecture), m); err != nil {
			return fmt.Errorf("image %s/%s: %w", p.OS, p.Architecture, err)
		}
		archive, err := tarball.ImageFromPath(filepath.Join(*dir, fmt.Sprintf("holdfast-image-%s-%s.tar", p.OS, p.Architecture)), nil)
		if err != nil {
			return err
		}
		// The archive re-encodes the manifest in docker's media types; the config and
		// layers are the same blobs.
		ac, err := archive.ConfigName()
		if err != nil {
			return err
		}
		lc, err := img.ConfigName()
		if err != nil {
			return err
		}
		if ac != lc {
			return fmt.Errorf("docker archive for %s/%s has config %s, the layout %s", p.OS, p.Architecture, ac, lc)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
		return fmt.Errorf("index platforms %v, want %v", got, want)
	}
	if err := verifyChart(filepath.Join(*dir, "holdfast-"+m.tag()+".tgz"), m.tag()); err != nil {
		return err
	}
	fmt.Printf("verified: index %s (linux/amd64, linux/arm64), user %s, entrypoint %s, no shell, binaries match, chart %s\n",
		om.Manifests[0].Digest, user, entrypoint, m.tag())
	return nil
}

func verifyImage(img v1.Image, p v1.Platform, binary string, m meta) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	c := cf.Config
	switch {
	case cf.OS != p.OS || cf.Architecture != p.Architecture:
		return fmt.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
	case c.User != user:
		return fmt.Errorf("user %q, want %q", c.User, user)
	case !slices.Equal(c.Entrypoint, []string{entrypoint}) || len(c.Cmd) != 0:
		return fmt.Errorf("entrypoint %v cmd %v", c.Entrypoint, c.Cmd)
	case !cf.Created.Time.Equal(m.created):
		return fmt.Errorf("created %s, want the commit's %s", cf.Created.Time, m.created)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  m.tag(),
		"org.opencontainers.image.revision": m.revision,
		"org.opencontainers.image.source":   "https://github.com/holdfast-dev/holdfast",
	} {
		if c.Labels[k] != v {
			return fmt.Errorf("label %s=%q, want %q", k, c.Labels[k], v)
		}
	}
	want, err := fileSHA256(binary)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var found bool
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if slices.Contains(shells, path.Base(name)) {
			return fmt.Errorf("the image has a shell: /%s", name)
		}
		if name == strings.TrimPrefix(entrypoint, "/") {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				return err
			}
			if got := hex.EncodeToString(sum.Sum(nil)); got != want {
				return fmt.Errorf("%s is not %s (sha256 %s, want %s)", entrypoint, binary, got, want)
			}
			if h.Mode&0o111 == 0 {
				return fmt.Errorf("%s is not executable (mode %o)", entrypoint, h.Mode)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("no %s in the image", entrypoint)
	}
	return nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// verifyChart reads Chart.yaml out of the packaged chart.
func verifyChart(tgz, version string) error {
	raw, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s has no holdfast/Chart.yaml", tgz)
		}
		if err != nil {
			return err
		}
		if h.Name != "holdfast/Chart.yaml" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		var meta struct {
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			return err
		}
		if meta.Version != version || meta.AppVersion != version {
			return fmt.Errorf("chart version %q appVersion %q, want both %q", meta.Version, meta.AppVersion, version)
		}
		return nil
	}
}
