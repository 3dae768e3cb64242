package container

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// What an agent sees from inside: each line of the probe is one claim, checked below.
const isolationProbe = `
echo "uid=$(id -u) gid=$(id -g)"
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status
echo "ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ,)"
touch /rootfs-write 2>/dev/null && echo rootfs=writable || echo rootfs=readonly
touch /agora/bin/x 2>/dev/null && echo agoradir=writable || echo agoradir=readonly
touch /tmp/x && echo tmp=writable
mount -t tmpfs none /tmp 2>/dev/null && echo mount=ok || echo mount=refused
unshare -U -r true 2>/dev/null && echo unshare-user=ok || echo unshare-user=refused
unshare -m true 2>/dev/null && echo unshare-mount=ok || echo unshare-mount=refused
ping -c1 -W1 1.1.1.1 >/dev/null 2>&1 && echo ping=ok || echo ping=refused
wget -q -T 2 -O- http://1.1.1.1/ >/dev/null 2>&1 && echo http=ok || echo http=refused
echo "pwd=$PWD"
env | sed 's/^/env:/' 
echo "pid1=$(cat /proc/1/cmdline | tr '\0' ' ')"
`

func TestProvider_Isolation(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	s := shSpec(t, isolationProbe)
	uid := strconv.FormatUint(uint64(s.RunAs.UID), 10)
	s.Dir = "/tmp"
	s.Env = append(s.Env, "FOO=bar")
	exit, out, errs := runSpec(t, p, s)
	if exit.Code != 0 {
		t.Fatalf("probe exit %+v\nstdout:\n%s\nstderr:\n%s", exit, out, errs)
	}
	t.Logf("probe:\n%s", out)
	for _, want := range []string{
		"uid=" + uid + " gid=" + uid + "\n",
		"CapEff:\t0000000000000000",
		"CapPrm:\t0000000000000000",
		"CapBnd:\t0000000000000000",
		"NoNewPrivs:\t1",
		"ifaces=lo,\n",
		"rootfs=readonly",
		"agoradir=readonly",
		"tmp=writable",
		"mount=refused",
		"unshare-user=refused",
		"unshare-mount=refused",
		"ping=refused",
		"http=refused",
		"pwd=/tmp\n",
		"env:FOO=bar\n",
		"env:PATH=/usr/bin:/bin\n",
		"pid1=/bin/sh -c",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q", want)
		}
	}
	// Nothing of the host's environment: only the spec's, PWD, and what every engine adds
	// (sh adds SHLVL).
	engineAdds := map[string]bool{"HOSTNAME": true, "HOME": true, "TERM": true, "container": true, "SHLVL": true}
	for _, line := range strings.Split(out, "\n") {
		kv, ok := strings.CutPrefix(line, "env:")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(kv, "=")
		if name != "FOO" && name != "PATH" && name != "PWD" && !engineAdds[name] {
			t.Errorf("unexpected environment entry %q in the container", kv)
		}
	}
}

// The attack: an agent writes through a read-only bind to the host's files.
func TestProvider_ReadOnlyBindAttack(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	host := t.TempDir()
	victim := filepath.Join(host, "victim")
	if err := os.WriteFile(victim, []byte("original"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(host, 0o777)
	rw := writableDir(t, 4242, 4242)
	s := shSpec(t, `
echo pwned > /ro/victim 2>/dev/null && echo write=ok || echo write=refused
rm -f /ro/victim 2>/dev/null && echo rm=ok || echo rm=refused
touch /ro/new 2>/dev/null && echo create=ok || echo create=refused
echo kept > /rw/out && echo rw=ok`)
	s.RunAs = &compute.HostUser{UID: 4242, GID: 4242}
	s.Binds = append(s.Binds, compute.Bind{Src: host, Dst: "/ro"}, compute.Bind{Src: rw, Dst: "/rw", Writable: true, Result: true})
	exit, out, errs := runSpec(t, p, s)
	if exit.Code != 0 {
		t.Fatalf("exit %+v: %s %s", exit, out, errs)
	}
	for _, want := range []string{"write=refused", "rm=refused", "create=refused", "rw=ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "original" {
		t.Errorf("victim now %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "out")); string(b) != "kept\n" {
		t.Errorf("writable bind holds %q, want kept", b)
	}
}

// The secret reaches fd 3 as a sealed file, stdin is /dev/null, the program is PID 1, and
// the secret is in no argv, environment, label or inspect output.
func TestProvider_SecretOnFD3(t *testing.T) {
	cli := engine(t)
	p := newTestProvider(t, Options{})
	const secret = "s3cr3t-d5f1c0de-never-elsewhere"
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write([]byte(secret)); w.Close() }()
	s := shSpec(t, `
cat <&3 > /rw/got
echo "fd0=$(readlink /proc/self/fd/0)"
echo "fd3=$(readlink /proc/self/fd/3)"
(echo x >&3) 2>/dev/null && echo fd3write=ok || echo fd3write=refused
echo "pid=$$"
cat /proc/1/cmdline | tr '\0' ' ' > /rw/cmdline
cat /proc/1/environ | tr '\0' ' ' > /rw/environ
touch /rw/ready
i=0; while [ ! -e /rw/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`)
	s.Files = []*os.File{r}
	rw := writableDir(t, int(s.RunAs.UID), int(s.RunAs.GID))
	s.Binds = append(s.Binds, compute.Bind{Src: rw, Dst: "/rw", Writable: true})
	var out, errb syncBuffer
	s.Stdout, s.Stderr = &out, &errb
	h, err := p.Start(t.Context(), s)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !waitFile(filepath.Join(rw, "ready")) {
		exit, err := h.Wait()
		t.Fatalf("the probe never got ready: exit %+v %v\nstdout: %s\nstderr: %s", exit, err, out.String(), errb.String())
	}
	id, _ := parseTaskID(h.TaskID())
	ins, err := cli.ContainerInspect(t.Context(), id, clientInspect())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ins.Container)
	if strings.Contains(string(ins.Raw), secret) || strings.Contains(string(raw), secret) {
		t.Error("the secret is in the container's inspect output")
	}
	if ins.Container.State != nil && ins.Container.State.Pid > 0 {
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(filepath.Join("/proc", itoa(ins.Container.State.Pid), f))
			if strings.Contains(string(b), secret) {
				t.Errorf("the secret is in the container process's host /proc %s", f)
			}
		}
	}
	os.WriteFile(filepath.Join(rw, "go"), nil, 0o666)
	exit, err := h.Wait()
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v %v: %s %s", exit, err, out.String(), errb.String())
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "got")); string(b) != secret {
		t.Errorf("fd 3 held %q, want the secret", b)
	}
	for _, want := range []string{"fd0=/dev/null", "fd3=/memfd:agora-secrets", "fd3write=refused", "pid=1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	for _, f := range []string{"cmdline", "environ"} {
		b, _ := os.ReadFile(filepath.Join(rw, f))
		if len(b) == 0 || strings.Contains(string(b), secret) {
			t.Errorf("/proc/1/%s inside is %q: empty or holding the secret", f, b)
		}
	}
	if strings.Contains(out.String(), secret) || strings.Contains(errb.String(), secret) {
		t.Error("the secret reached the container's output")
	}
}
