package local

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// FuzzBwrapOptions checks that no accepted spec can smuggle an extra bwrap option through
// the NUL-separated --args stream: decoding the stream gives back exactly the options,
// and each environment entry arrives as one --setenv NAME VALUE triple.
func FuzzBwrapOptions(f *testing.F) {
	f.Add("K=v", "/work", "/host", "/dst", true)
	f.Add("K=a\x00--bind\x00/\x00/x", "/w", "/h", "/d", false)
	f.Add("--bind=/ /", "/", "/a/../b", "--bind", false)
	f.Fuzz(func(t *testing.T, env, dir, src, dst string, writable bool) {
		s := compute.Spec{
			Argv:  []string{"true"},
			Env:   []string{env},
			Dir:   dir,
			Binds: []compute.Bind{{Src: src, Dst: dst, Writable: writable}},
		}
		if validateSpec(s) != nil {
			return
		}
		opts := bwrapOptions(s, []string{"--ro-bind", "/usr", "/usr"}, stagedSystem{}, newFDLayout(1), writable)
		enc := encodeArgs(opts)
		dec := strings.Split(string(bytes.TrimSuffix(enc, []byte{0})), "\x00")
		if !slices.Equal(dec, opts) {
			t.Fatalf("decoded %q, want %q", dec, opts)
		}
		k, v, _ := strings.Cut(env, "=")
		if k != "PWD" && !containsRun(opts, []string{"--setenv", k, v}) {
			t.Fatalf("env %q is not one --setenv triple in %q", env, opts)
		}
		if n := strings.Count(strings.Join(opts, "\x00"), "\x00--share-net\x00"); n != 0 {
			t.Fatalf("--share-net appeared without Network")
		}
	})
}

func FuzzParseCgroupV2Mount(f *testing.F) {
	f.Add([]byte("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"))
	f.Add([]byte(`41 31 0:38 /a\040b /mnt/c\040g rw - cgroup2 cgroup2 rw`))
	f.Add([]byte(`1 2 3 \ \0 - cgroup2`))
	f.Fuzz(func(t *testing.T, b []byte) {
		mount, root, err := parseCgroupV2Mount(b)
		if err != nil || bytes.IndexByte(b, '\\') >= 0 {
			return
		}
		// Without escapes, both paths are fields of the input.
		if !bytes.Contains(b, []byte(mount)) || !bytes.Contains(b, []byte(root)) {
			t.Fatalf("mount %q, root %q not in %q", mount, root, b)
		}
	})
}

// FuzzCgroupDir checks that a cgroup path read from /proc/<pid>/cgroup can never name a
// directory outside the cgroup mount: Cancel writes cgroup.kill there.
func FuzzCgroupDir(f *testing.F) {
	f.Add("/sys/fs/cgroup", "/", "/agora-x")
	f.Add("/cg", "/sub", "/sub/../../etc")
	f.Add("/cg", "/", "/a/..")
	f.Fuzz(func(t *testing.T, mount, root, path string) {
		if !filepath.IsAbs(mount) {
			return
		}
		dir, err := cgroupDir(mount, root, path)
		if err != nil {
			return
		}
		rel, err := filepath.Rel(mount, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("cgroupDir(%q, %q, %q) = %q, outside the mount", mount, root, path, dir)
		}
	})
}
