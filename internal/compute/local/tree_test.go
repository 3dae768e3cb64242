package local

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/worker/wire"
)

func TestTreeTop_IsTheLayoutsRoot(t *testing.T) {
	if treeTop != wire.DefaultRoot {
		t.Fatalf("treeTop %q, the dispatch layout's root %q", treeTop, wire.DefaultRoot)
	}
}

func TestTreeMembers(t *testing.T) {
	b := func(dst string) compute.Bind { return compute.Bind{Src: "/src" + dst, Dst: dst} }
	for _, c := range []struct {
		name  string
		binds []compute.Bind
		want  []string // the members' Dst; nil: no tree
		first int
	}{
		{"a dispatch's", []compute.Bind{b("/agora/bin/agora-worker"), b("/agora/bundle"), b("/agora/workspace"), b("/agora/out"), b("/agora/capabilities")},
			[]string{"/agora/bin/agora-worker", "/agora/bundle", "/agora/workspace", "/agora/out", "/agora/capabilities"}, 0},
		{"others keep their place", []compute.Bind{b("/probe"), b("/agora/bundle"), b("/etc/ssl/certs/x"), b("/agora/out")},
			[]string{"/agora/bundle", "/agora/out"}, 1},
		{"unclean paths are cleaned", []compute.Bind{b("/agora//bundle/"), b("/agora/./out")}, []string{"/agora/bundle", "/agora/out"}, 0},
		{"one alone", []compute.Bind{b("/agora/bundle"), b("/probe")}, nil, -1},
		{"none", []compute.Bind{b("/probe")}, nil, -1},
		{"the top itself", []compute.Bind{b("/agora"), b("/agora/bundle"), b("/agora/out")}, nil, -1},
		{"one below another", []compute.Bind{b("/agora/bundle"), b("/agora/bundle/manifest.json"), b("/agora/out")}, nil, -1},
		{"one below another, later first", []compute.Bind{b("/agora/bundle/manifest.json"), b("/agora/out"), b("/agora/bundle")}, nil, -1},
		{"the same place twice", []compute.Bind{b("/agora/out"), b("/agora/out")}, nil, -1},
		{"a prefix that is not a parent", []compute.Bind{b("/agora/out"), b("/agora/outputs")}, []string{"/agora/out", "/agora/outputs"}, 0},
		{"a sibling of the top", []compute.Bind{b("/agoraX/a"), b("/agoraX/b")}, nil, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			members, first := treeMembers(c.binds)
			var got []string
			for _, m := range members {
				got = append(got, m.Dst)
			}
			if !slices.Equal(got, c.want) || first != c.first {
				t.Fatalf("members %q first %d, want %q %d", got, first, c.want, c.first)
			}
		})
	}
}

// treeProbe, inside the sandbox: every write, mount and attribute change an agent could try
// on /agora and the binds below it, and the file systems' view.
func treeProbe() int {
	try("create /agora/planted", createFile("/agora/planted"))
	try("mkdir /agora/bin/more", os.Mkdir("/agora/bin/more", 0o755))
	try("write the read-only file", os.WriteFile("/agora/bin/tool", []byte("x"), 0o644))
	try("create in the read-only dir", createFile("/agora/bundle/planted"))
	try("create in the mount below the read-only dir", createFile("/agora/bundle/sub/planted"))
	for _, p := range []string{"/agora", "/agora/bundle", "/agora/bundle/sub", "/agora/bin/tool"} {
		try("remount "+p+" read-write", unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
		try("unmount "+p, unix.Unmount(p, unix.MNT_DETACH))
		try("clear "+p+"'s read-only flag", unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}))
		try("mount a tmpfs over "+p, unix.Mount("tmpfs", p, "tmpfs", 0, ""))
	}
	// The rest of the root: laid out by root (layOutRoot) or built by bwrap, no part of it
	// may be written, remounted or uncovered.
	for _, p := range []string{"/planted", "/etc/ld.so.preload", "/dev/planted", "/usr/planted", "/proc/planted"} {
		try("create "+p, createFile(p))
	}
	for _, p := range []string{"/", "/etc", "/dev", "/usr"} {
		try("remount "+p+" read-write", unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
		try("unmount "+p, unix.Unmount(p, unix.MNT_DETACH))
		try("clear "+p+"'s read-only flag", unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE,
			&unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}))
	}
	if err := os.WriteFile("/dev/null", []byte("x"), 0); err != nil {
		fmt.Println("ERR write /dev/null:", err)
	}
	if err := os.WriteFile("/tmp/scratch", []byte("x"), 0o644); err != nil {
		fmt.Println("ERR write /tmp:", err)
	}
	if err := os.WriteFile("/dev/shm/scratch", []byte("x"), 0o644); err != nil {
		fmt.Println("ERR write /dev/shm:", err)
	}
	try("open_tree /agora", func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/agora", unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}())
	if err := os.WriteFile("/agora/workspace/written", []byte("from the sandbox"), 0o644); err != nil {
		fmt.Println("ERR write the workspace:", err)
	} else {
		fmt.Println("wrote the workspace")
	}
	if b, err := os.ReadFile("/agora/bundle/sub/seen"); err == nil {
		fmt.Printf("read below the bundle: %s\n", b)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Print("mountinfo:\n", string(b))
	return 0
}

// TestRedTeamTree_AgentCannotWidenTheTree: a RunAs sandbox whose whole root is laid out
// beforehand (layOutRoot), one whose binds below /agora are only one tree (bindTree), and the
// same binds made one by one (a bind below another keeps them apart): every write outside
// the writable binds, /tmp, /dev/shm and the device nodes, every remount, unmount, flag
// change and mount fails in each; every mount point bwrap makes is there with no flag
// weaker, a submount of a read-only source is read-only too, and /agora itself is
// read-only.
func TestRedTeamTree_AgentCannotWidenTheTree(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{NoCgroup: true})
	open := func(p string) string {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tool := filepath.Join(open(t.TempDir()), "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bundle := open(t.TempDir())
	sub := filepath.Join(bundle, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// A mount inside a read-only source: --ro-bind makes it read-only too.
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "mode=0777,size=64k"); err != nil {
		t.Fatalf("mount a tmpfs in the bundle: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "seen"), []byte("below"), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	out := open(t.TempDir())
	nested := open(t.TempDir())
	// root: every bind below /agora, so the whole root is laid out (layOutRoot); tree: the
	// probe outside /agora, so only the tree is, and bwrap builds the rest; apart: a bind
	// below another keeps every bind apart.
	const root, tree, apart = "root", "tree", "apart"
	spec := func(layout string) compute.Spec {
		probe := probeBind(t)
		if layout == root {
			probe.Dst = "/agora/probe"
		}
		s := compute.Spec{
			ID:   "rt-tree",
			Argv: []string{probe.Dst},
			Env:  []string{"PATH=/usr/bin:/bin", stageProbeEnv + "=tree"},
			Binds: []compute.Bind{probe,
				{Src: tool, Dst: "/agora/bin/tool"},
				{Src: bundle, Dst: "/agora/bundle"},
				{Src: work, Dst: "/agora/workspace", Writable: true},
				{Src: out, Dst: "/agora/out", Writable: true},
			},
			RunAs:  testRunAs,
			Limits: compute.Limits{Timeout: 30 * time.Second},
		}
		if layout == apart {
			s.Binds = append(s.Binds, compute.Bind{Src: nested, Dst: "/agora/workspace/nested"})
		}
		return s
	}
	got := map[string]map[string]mountEntry{}
	for _, tree := range []string{root, tree, apart} {
		r := run(t, p, spec(tree))
		if r.exit.Code != 0 {
			t.Fatalf("tree %v: exit %+v\n%s\n%s", tree, r.exit, r.stdout, r.stderr)
		}
		lines := strings.Split(r.stdout, "\n")
		for _, l := range lines {
			if strings.HasPrefix(l, "ESCAPED") {
				t.Errorf("tree %v: %s", tree, l)
			}
		}
		if strings.Contains(r.stdout, "ERR") {
			t.Errorf("tree %v: what the sandbox must be able to do failed:\n%s", tree, r.stdout)
		}
		for _, want := range []string{"wrote the workspace", "read below the bundle: below"} {
			if !slices.Contains(lines, want) {
				t.Errorf("tree %v: no %q:\n%s", tree, want, r.stdout)
			}
		}
		if b, err := os.ReadFile(filepath.Join(work, "written")); err != nil || string(b) != "from the sandbox" {
			t.Errorf("tree %v: the workspace's write on the host: %q %v", tree, b, err)
		}
		os.Remove(filepath.Join(work, "written"))
		_, info, _ := strings.Cut(r.stdout, "mountinfo:\n")
		got[tree] = parseMountinfo(info)
		if testing.Verbose() {
			t.Logf("tree %v:\n%s", tree, r.stdout)
		}
	}
	if top, ok := got[tree]["/agora"]; !ok || !top.opts["ro"] || !top.opts["nosuid"] || !top.opts["nodev"] {
		t.Errorf("the tree's /agora %+v, want a read-only nosuid nodev mount", top)
	}
	if _, ok := got[apart]["/agora"]; ok {
		t.Errorf("the binds made apart mount /agora: the test's other layout is a tree too")
	}
	// layOutRoot's root is a tmpfs of its own (its mount's root is the file system's), where
	// bwrap's is a directory of the tmpfs it pivots from.
	if got[root]["/"].root != "/" || got[tree]["/"].root == "/" || got[root]["/"].super != got[tree]["/"].super {
		t.Errorf("the root laid out %+v, the tree's root %+v: want one tmpfs of its own, with bwrap's options", got[root]["/"], got[tree]["/"])
	}
	for _, layout := range []string{root, tree} {
		for _, mp := range []string{"/agora/bin/tool", "/agora/bundle", "/agora/bundle/sub", "/agora/workspace", "/agora/out"} {
			e, b := got[layout][mp], got[apart][mp]
			if e.fs == "" || b.fs == "" {
				t.Errorf("%s %s: %+v, apart %+v", layout, mp, e, b)
				continue
			}
			if e.fs != b.fs || e.root != b.root {
				t.Errorf("%s: %s is %s %s, %s %s apart", layout, mp, e.fs, e.root, b.fs, b.root)
			}
		}
		l := got[layout]
		if !l["/agora/bundle/sub"].opts["ro"] || !l["/agora/bin/tool"].opts["ro"] || l["/agora/workspace"].opts["ro"] {
			t.Errorf("%s: flags: bundle/sub %v, bin/tool %v, workspace %v", layout,
				l["/agora/bundle/sub"].opts, l["/agora/bin/tool"].opts, l["/agora/workspace"].opts)
		}
		// Every mount point of the binds made apart (bwrap's own /, /usr, /etc, /dev, /proc,
		// /tmp and the rest), with no flag weaker; and no mount the other has not, but
		// /agora itself and the probe's.
		for mp, b := range got[apart] {
			if mp == "/agora/workspace/nested" || mp == "/probe" {
				continue
			}
			e, ok := l[mp]
			if !ok {
				t.Errorf("%s: no mount at %s (apart: %s %v)", layout, mp, b.fs, b.opts)
				continue
			}
			for _, o := range []string{"ro", "nosuid", "nodev", "noexec"} {
				if b.opts[o] && !e.opts[o] {
					t.Errorf("%s: %s is %s made apart but not here: %v against %v", layout, mp, o, e.opts, b.opts)
				}
			}
		}
		for mp := range l {
			if _, ok := got[apart][mp]; !ok && mp != "/agora" && mp != "/agora/probe" {
				t.Errorf("%s: a mount at %s the binds made apart have not", layout, mp)
			}
			if strings.HasPrefix(mp, privateRoot) {
				t.Errorf("%s: the sandbox has a mount at %s", layout, mp)
			}
		}
	}
}

func TestSystemBinds(t *testing.T) {
	host := systemOptions("/")
	if ops, ok := systemBinds(host); !ok || len(ops) == 0 || ops[0].dst != "/usr" {
		t.Fatalf("this host's systemOptions %q: %+v %v", host, ops, ok)
	}
	for _, c := range []struct {
		name   string
		system []string
	}{
		{"a place below a link", []string{"--ro-bind", "/usr", "/usr", "--symlink", "/etc", "/lib", "--ro-bind", "/usr/lib", "/lib/x"}},
		{"a place below a bind", []string{"--ro-bind", "/usr", "/usr", "--ro-bind", "/opt", "/usr/opt"}},
		{"a place above an earlier one", []string{"--ro-bind", "/usr/lib", "/a/b", "--ro-bind", "/usr", "/a"}},
		{"the same place twice", []string{"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib"}},
		{"the root", []string{"--ro-bind", "/", "/"}},
		{"an unclean place", []string{"--ro-bind", "/usr", "/usr/"}},
		{"a relative place", []string{"--ro-bind", "/usr", "usr"}},
		{"an option it does not know", []string{"--ro-bind-try", "/usr", "/usr"}},
		{"a short list", []string{"--ro-bind", "/usr"}},
	} {
		if ops, ok := systemBinds(c.system); ok {
			t.Errorf("%s: %+v, want the layout left to bwrap", c.name, ops)
		}
	}
}
