package k8stest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// ImageFile is one file of an image made by OCIImage.
type ImageFile struct {
	Path string      // absolute in the image, "/hello"
	Mode fs.FileMode // permission bits, 0o755 for a program
	Data []byte
}

// OCIImage builds a one-layer linux/amd64 image, FROM scratch, as an OCI image-layout tar
// that `ctr images import` reads, named name ("k8stest.invalid/hello:1"). It returns the tar
// and the image's digest-pinned reference (name's repository @ the manifest's digest), the
// form agora's targets require. No registry and no podman: the bytes are made here, so the
// digest is known before the import.
func OCIImage(name string, entrypoint []string, files ...ImageFile) (tarball []byte, pinned string, err error) {
	i := strings.LastIndexByte(name, ':')
	if i <= strings.LastIndexByte(name, '/') || i == len(name)-1 || strings.Contains(name, "@") {
		return nil, "", fmt.Errorf("image name %q: want REPOSITORY:TAG", name)
	}
	repo, tag := name[:i], name[i+1:]
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") {
			return nil, "", fmt.Errorf("image file %q: want an absolute path without ..", f.Path)
		}
		hdr := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(f.Mode.Perm()), Size: int64(len(f.Data)),
			Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}
		if err := lw.WriteHeader(hdr); err != nil {
			return nil, "", fmt.Errorf("image layer: %w", err)
		}
		if _, err := lw.Write(f.Data); err != nil {
			return nil, "", fmt.Errorf("image layer: %w", err)
		}
	}
	if err := lw.Close(); err != nil {
		return nil, "", fmt.Errorf("image layer: %w", err)
	}
	layerDesc := descriptor("application/vnd.oci.image.layer.v1.tar", layer.Bytes())

	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "User": "65534:65534"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	configDesc := descriptor("application/vnd.oci.image.config.v1+json", config)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        configDesc,
		"layers":        []ociDescriptor{layerDesc},
	})
	manifestDesc := descriptor("application/vnd.oci.image.manifest.v1+json", manifest)
	manifestDesc.Platform = &struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	}{"amd64", "linux"}
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tag,
	}
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []ociDescriptor{manifestDesc},
	})

	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(manifestDesc.Digest), manifest},
		{blobPath(configDesc.Digest), config},
		{blobPath(layerDesc.Digest), layer.Bytes()},
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return nil, "", fmt.Errorf("image tar: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, "", fmt.Errorf("image tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", fmt.Errorf("image tar: %w", err)
	}
	return out.Bytes(), repo + "@" + manifestDesc.Digest, nil
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int    `json:"size"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func descriptor(mediaType string, b []byte) ociDescriptor {
	sum := sha256.Sum256(b)
	return ociDescriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: len(b)}
}

func blobPath(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }
