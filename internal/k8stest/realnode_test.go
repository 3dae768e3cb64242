package k8stest_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// probeSource reports, from inside the pod, what the sandbox is: who it runs as, its
// capabilities, no-new-privileges and seccomp, and whether the root file system takes a
// write. An argument is the exit code to end with.
const probeSource = `package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	fmt.Printf("hello from the pod uid=%d gid=%d\n", os.Getuid(), os.Getgid())
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		for _, k := range []string{"CapEff:", "CapPrm:", "NoNewPrivs:", "Seccomp:"} {
			if strings.HasPrefix(l, k) {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	if err := os.WriteFile("/written", []byte("x"), 0o644); err != nil {
		fmt.Println("root write refused")
	} else {
		fmt.Println("root write allowed")
	}
	if len(os.Args) > 1 {
		code, _ := strconv.Atoi(os.Args[1])
		os.Exit(code)
	}
}
`

func buildProbe(t *testing.T) []byte { return buildStatic(t, "probe", probeSource) }

// buildStatic builds a one-file Go program into a static binary, for an image FROM scratch.
func buildStatic(tb testing.TB, name, source string) []byte {
	tb.Helper()
	dir := tb.TempDir()
	src := filepath.Join(dir, name+".go")
	if err := os.WriteFile(src, []byte(source), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the %s: %v\n%s", name, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestRealNodeRunsHardenedJob runs a static binary in a hardened Job on a real kubelet,
// containerd and runc, from an image pinned by digest that no registry holds, and reads what
// it saw of its sandbox from its log through the apiserver.
func TestRealNodeRunsHardenedJob(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{RealNode: true})
	tarball, pinned, err := k8stest.OCIImage("k8stest.invalid/probe:1", []string{"/probe"},
		k8stest.ImageFile{Path: "/probe", Mode: 0o755, Data: buildProbe(t)})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := c.ImportImage(t.Context(), tarball)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0] != pinned {
		t.Fatalf("imported %q, want [%s]", refs, pinned)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"probe-ok", nil, "Complete", 0},
		{"probe-exit-3", []string{"3"}, "Failed", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := hardenedPodSpec()
			ctr := spec["containers"].([]any)[0].(map[string]any)
			ctr["image"], ctr["command"], ctr["args"] = pinned, []string{"/probe"}, tc.args
			begin := time.Now()
			if err := c.Do(t.Context(), http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
				job(tc.name, nil, nil, spec), nil); err != nil {
				t.Fatal(err)
			}
			end := waitJobOn(t, c, tc.name)
			t.Logf("job %s: %s in %s", tc.name, end, time.Since(begin).Round(time.Millisecond))
			if end != tc.want {
				t.Fatalf("job ended %s, want %s\nkubelet log:\n%s", end, tc.want, c.Log("kubelet"))
			}
			pods := jobPods(t, c, tc.name)
			if len(pods.Items) != 1 {
				t.Fatalf("%d pods, want 1", len(pods.Items))
			}
			st := pods.Items[0].Status
			if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil ||
				st.ContainerStatuses[0].State.Terminated.ExitCode != tc.code {
				t.Fatalf("container status %+v, want exit code %d", st.ContainerStatuses, tc.code)
			}
			var log []byte
			if err := c.Do(t.Context(), http.MethodGet, "/api/v1/namespaces/"+c.Namespace+"/pods/"+pods.Items[0].Metadata.Name+"/log", nil, &log); err != nil {
				t.Fatalf("pod log: %v", err)
			}
			t.Logf("pod log:\n%s", log)
			for _, want := range []string{
				"uid=65534 gid=65534", "CapEff: 0000000000000000", "CapPrm: 0000000000000000",
				"NoNewPrivs: 1", "Seccomp: 2", "root write refused",
			} {
				if !strings.Contains(string(log), want) {
					t.Errorf("pod log lacks %q", want)
				}
			}
		})
	}
}

func waitJobOn(t *testing.T, c *k8stest.Cluster, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	var end string
	err := c.Wait(ctx, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs/"+name, func(obj map[string]any) (bool, error) {
		for _, typ := range []string{"Complete", "Failed"} {
			if jobCondition(obj, typ) == "True" {
				end = typ
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("job %s: %v\nkubelet log:\n%s\ncontainerd log:\n%s", name, err, c.Log("kubelet"), c.Log("containerd"))
	}
	return end
}
