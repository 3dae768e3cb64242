package k8stest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// PushOCI pushes an image tar made by OCIImage (an OCI image layout with one manifest) to
// REGISTRY/repo:tag over the distribution API, as the registry's one user, and returns it
// pinned by its manifest digest (Host/repo@sha256:...). The registry checks every digest, so
// what the node later pulls is what was made here, byte for byte.
func (r *Registry) PushOCI(ctx context.Context, tarball []byte, repo, tag string) (string, error) {
	files, err := untar(tarball)
	if err != nil {
		return "", err
	}
	var index struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return "", fmt.Errorf("push %s: the layout's index.json does not name one manifest (%v)", repo, err)
	}
	md := index.Manifests[0]
	manifest := files[blobPath(md.Digest)]
	var m struct {
		Config ociDescriptor   `json:"config"`
		Layers []ociDescriptor `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return "", fmt.Errorf("push %s: the manifest: %w", repo, err)
	}
	client := r.client()
	defer client.CloseIdleConnections()
	for _, d := range append([]ociDescriptor{m.Config}, m.Layers...) {
		blob, ok := files[blobPath(d.Digest)]
		if !ok {
			return "", fmt.Errorf("push %s: blob %s is not in the layout", repo, d.Digest)
		}
		if err := r.pushBlob(ctx, client, repo, d.Digest, blob); err != nil {
			return "", err
		}
	}
	if _, err := r.do(ctx, client, http.MethodPut, "/v2/"+repo+"/manifests/"+tag, md.MediaType, manifest, http.StatusCreated); err != nil {
		return "", fmt.Errorf("push %s manifest: %w", repo, err)
	}
	return r.Host + "/" + repo + "@" + md.Digest, nil
}

// pushBlob uploads one blob in a single PUT (a monolithic upload).
func (r *Registry) pushBlob(ctx context.Context, client *http.Client, repo, digest string, blob []byte) error {
	resp, err := r.do(ctx, client, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", "", nil, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("push %s blob %s: %w", repo, digest, err)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Path == "" {
		return fmt.Errorf("push %s blob %s: upload location %q", repo, digest, resp.Header.Get("Location"))
	}
	q := loc.Query()
	q.Set("digest", digest)
	path := loc.Path + "?" + q.Encode()
	if _, err := r.do(ctx, client, http.MethodPut, path, "application/octet-stream", blob, http.StatusCreated); err != nil {
		return fmt.Errorf("push %s blob %s: %w", repo, digest, err)
	}
	return nil
}

// do sends one authenticated request to the registry and wants status want.
func (r *Registry) do(ctx context.Context, client *http.Client, method, path, contentType string, body []byte, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "https://"+r.Host+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(r.User, r.Password)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %s: %s", method, strings.SplitN(path, "?", 2)[0], resp.Status, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// client trusts the registry's CA only.
func (r *Registry) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.CAPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// untar reads a tar's regular files by name.
func untar(b []byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the image tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read the image tar: %w", err)
		}
		files[h.Name] = data
	}
}
