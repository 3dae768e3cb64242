package k8stest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/k8stest"
)

// The placeholders deploy/kubernetes's files hold for what is a site's own: the images, pinned
// by digest. A deploy test substitutes these and nothing else.
const (
	placeholderAgora     = "registry.example/agora/agora@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	placeholderWorker    = "registry.example/agora/worker@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	placeholderToolchain = "registry.example/agents/toolchain@sha256:0000000000000000000000000000000000000000000000000000000000000000"
)

// deployImages are agora's three images, built from this tree by scripts/images.sh (as a
// person does) and imported into the node's containerd, by the references containerd holds.
type deployImages struct{ agora, worker, toolchain string }

// buildDeployImages runs `scripts/images.sh agora worker toolchain` and imports the three, or
// skips saying what is missing.
func buildDeployImages(ctx context.Context, t *testing.T, c *k8stest.Cluster) deployImages {
	t.Helper()
	refs := deployImageRefs(ctx, t)
	var im deployImages
	var err error
	for src, dst := range map[string]*string{refs.agora: &im.agora, refs.worker: &im.worker, refs.toolchain: &im.toolchain} {
		if *dst, err = c.ImportPodmanImage(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	return im
}

// deployImageRefs runs `scripts/images.sh agora worker toolchain` and returns podman's
// references of the three, or skips saying what is missing.
func deployImageRefs(ctx context.Context, t *testing.T) deployImages {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("SKIP: podman is missing (scripts/images.sh builds agora's images with it): run scripts/podman.sh")
	}
	cmd := exec.CommandContext(ctx, "../../scripts/images.sh", "agora", "worker", "toolchain")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/images.sh agora worker toolchain: %v\n%s", err, stderr.Bytes())
	}
	refs := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			refs[k] = v
		}
	}
	var im deployImages
	for key, dst := range map[string]*string{"AGORA_IMAGE": &im.agora, "AGORA_WORKER_IMAGE": &im.worker, "AGORA_TOOLCHAIN_IMAGE": &im.toolchain} {
		if refs[key] == "" {
			t.Fatalf("scripts/images.sh printed no %s:\n%s", key, out)
		}
		*dst = refs[key]
	}
	return im
}

// manifestObjects reads files of deploy/kubernetes, replaces each placeholder by its image,
// and returns their objects in file order.
func manifestObjects(t *testing.T, im deployImages, files ...string) []map[string]any {
	t.Helper()
	return siteManifestObjects(t, im, nil, files...)
}

// siteManifestObjects is manifestObjects with more of a site's own values substituted: site
// holds old, new pairs (a bucket's endpoint, say), each of which must occur in the files, so
// that a placeholder renamed in a file fails the test instead of going unreplaced.
func siteManifestObjects(t *testing.T, im deployImages, site []string, files ...string) []map[string]any {
	t.Helper()
	pairs := append([]string{placeholderAgora, im.agora, placeholderWorker, im.worker, placeholderToolchain, im.toolchain}, site...)
	repl := strings.NewReplacer(pairs...)
	var all strings.Builder
	var objs []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../../deploy/kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		dec := yaml.NewDecoder(strings.NewReader(repl.Replace(string(b))))
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj != nil {
				objs = append(objs, obj)
			}
		}
	}
	for i := 0; i < len(site); i += 2 {
		if !strings.Contains(all.String(), site[i]) {
			t.Fatalf("%v: no %q to substitute", files, site[i])
		}
	}
	return objs
}

// homeVolume is the PersistentVolume the manifests' claim binds to: a directory of this host,
// its root owned by group 10001 with setgid, as the kubelet leaves a volume's root for the
// pod's fsGroup (a hostPath volume gets no fsGroup treatment, so the test does it).
func homeVolume(t *testing.T, claimNS, claim string) (string, map[string]any) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pv")
	if err := os.Mkdir(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 0, 10001); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	return dir, map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": "k8stest-" + claim},
		"spec": map[string]any{
			"capacity":                      map[string]string{"storage": "20Gi"},
			"accessModes":                   []string{"ReadWriteOnce"},
			"persistentVolumeReclaimPolicy": "Retain",
			"hostPath":                      map[string]any{"path": dir, "type": "Directory"},
			"claimRef":                      map[string]string{"namespace": claimNS, "name": claim},
		},
	}
}

// podLog is container ctr's log of pod ns/name, or the error's text.
func podLog(ctx context.Context, c *k8stest.Cluster, ns, name, ctr string) string {
	var b []byte
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log?container=%s", ns, name, ctr), nil, &b); err != nil {
		return err.Error()
	}
	return string(b)
}

// podsOf lists the pods of ns matching the label selector, with their phase and node.
func podsOf(ctx context.Context, t *testing.T, c *k8stest.Cluster, ns, selector string) []podInfo {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct{ NodeName string }
			Status   struct {
				Phase string
				PodIP string
			}
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector="+selector, nil, &list); err != nil {
		t.Fatal(err)
	}
	var out []podInfo
	for _, p := range list.Items {
		out = append(out, podInfo{p.Metadata.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP})
	}
	return out
}

type podInfo struct{ name, node, phase, ip string }
