package dispatch_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// isolationProbe is what an agent finds of its sandbox, one claim a line; a claimed docker
// slot must find what a cold container finds, line by line.
const isolationProbe = `
echo "uidroot=$([ "$(id -u)" = 0 ] && echo yes || echo no)"
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
echo "ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ,)"
touch /rootfs-write 2>/dev/null && echo rootfs=writable || echo rootfs=readonly
touch /agora/bin/x 2>/dev/null && echo bindir=writable || echo bindir=readonly
touch /agora/x 2>/dev/null && echo agoraroot=writable || echo agoraroot=readonly
[ -e /agora-gateway.sock ] && echo gatewaysock=yes || echo gatewaysock=no
touch /tmp/x && echo tmp=writable
touch ws-probe && echo workspace=writable && rm ws-probe
mount -t tmpfs none /tmp 2>/dev/null && echo mount=ok || echo mount=refused
unshare -U -r true 2>/dev/null && echo unshare-user=ok || echo unshare-user=refused
wget -q -T 2 -O- http://1.1.1.1/ >/dev/null 2>&1 && echo http=ok || echo http=refused
for d in /agora/bundle /agora/capabilities; do
  echo "$d mount=$(awk -v m=$d '$5==m {split($6,o,","); print o[1]}' /proc/self/mountinfo)"
  touch $d/new 2>/dev/null && echo "$d create=ok" || echo "$d create=refused"
  [ -e $d/evil ] && echo "$d planted=yes" || echo "$d planted=no"
  f=$(find $d -type f | sort | head -1)
  [ -n "$f" ] || { echo "$d nofile"; continue; }
  chmod u+w "$f" 2>/dev/null; echo x >> "$f" 2>/dev/null && echo "$d write=ok" || echo "$d write=refused"
  rm -f "$f" 2>/dev/null; [ -e "$f" ] && echo "$d rm=refused" || echo "$d rm=ok"
  chmod 777 $d 2>/dev/null; touch $d/new2 2>/dev/null && echo "$d chmod-create=ok" || echo "$d chmod-create=refused"
done
m=/agora/bundle/manifest.json
echo "manifest mount=$(awk -v m=$m '$5==m {split($6,o,","); print o[1]}' /proc/self/mountinfo)"
echo x >> $m 2>/dev/null && echo manifest-write=ok || echo manifest-write=refused
`

// slotDifferences are the probe's lines a claimed slot may show otherwise than a cold
// container, each with why (docs/providers.md "Warm slots (docker and podman)").
var slotDifferences = map[string]string{
	"agoraroot=readonly": "a slot's /agora is a tmpfs of its uid (the worker fetches the workspace and the out " +
		"directory there at claim); a cold container's is the image's directory in its read-only root. " +
		"The agent may create files beside the layout, within the slot's scratch size; the host reads only the uploaded out directory",
	"gatewaysock=no": "a slot's one way out is the gateway's socket; its token was spent at the claim, so it opens " +
		"nothing for the agent (a replayed slot token is refused: TestSlotContainer tests)",
}

// TestDockerWarm_ReadOnlyForReal: the isolation probe run in a claimed docker slot finds what
// it finds in a cold container: the bundle, the capability files and the manifest are
// read-only mounts (an agent that chmods a file back still cannot write, remove or create:
// EROFS, whoever owns the file, where copies in the slot's tmpfs with their write bits off
// are writable after a chmod). Attacks: before the claim, a process in the slot container
// (run there through the engine as the container's user) tries to plant files in those
// places; it is refused, and the dispatch finds none. It plants a file in the workspace's
// place in the slot's tmpfs instead: the slot's worker refuses to fetch into a place that is
// not empty, and the dispatch fails rather than run on the planted file (run, it would have
// the file in its workspace and its baseline, so in no patch).
func TestDockerWarm_ReadOnlyForReal(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	e.subagent("prober", isolationProbe)
	req := dispatch.Request{Subagent: "prober", Repo: gitRepo(t, map[string]string{"README": "one\n"}), Target: "box", Timeout: 2 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	deadline := time.Now().Add(90 * time.Second)
	for boxCounts(w).Ready < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The planting attempts, in the ready slot's container.
	cli, err := client.New(client.WithHost(containerHost()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerList(t.Context(), client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", container.LabelHome+"="+container.HomeLabel(e.home.Dir))})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("slot containers: %v, %v; want 1", res.Items, err)
	}
	for _, d := range []string{"/agora/bundle", "/agora/capabilities"} {
		if code := execIn(t, cli, res.Items[0].ID, "touch "+d+"/evil && chmod 777 "+d); code == 0 {
			t.Errorf("planting a file in the ready slot's %s succeeded", d)
		}
	}
	// The job's own places before the claim: a workspace planted in the slot's tmpfs.
	execIn(t, cli, res.Items[0].ID, "mkdir -p /agora/workspace && echo planted > /agora/workspace/planted.txt")
	hot := e.run(req)
	t.Logf("warm: %s %s %s", hot.State, hot.Reason, hot.Detail)
	if hot.State == lifecycle.DispatchFinished {
		t.Fatalf("a dispatch ran in a slot whose workspace place held a planted file: %s\n%s", e.stdout(hot), e.patch(hot))
	}
	// The worker's refusal goes to the slot container's own stderr (the dispatch's streams are
	// not up yet): the record says the worker failed.
	if hot.Reason != lifecycle.ReasonWorkerFailed {
		t.Errorf("the refused slot's dispatch ended %s/%s %q, want failed/worker-failed", hot.State, hot.Reason, hot.Detail)
	}
	// The next slot, untouched, runs the probe.
	for deadline := time.Now().Add(90 * time.Second); boxCounts(w).Ready < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
		}
	}
	hot = e.run(req)
	wantFinished(t, hot)
	if c := boxCounts(w); c.Claimed != 2 || c.Cold != 0 {
		t.Fatalf("counts %+v, want the second and third dispatches claimed in slots", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold probe:\n%s\nwarm probe:\n%s", co, ho)
	for _, want := range []string{"/agora/bundle mount=ro", "/agora/bundle write=refused", "/agora/bundle rm=refused",
		"/agora/capabilities mount=ro", "/agora/bundle planted=no", "/agora/capabilities planted=no",
		"/agora/bundle chmod-create=refused", "manifest-write=refused", "workspace=writable"} {
		if !strings.Contains(ho, want+"\n") {
			t.Errorf("warm probe lacks %q", want)
		}
	}
	cl, hl := strings.Split(co, "\n"), strings.Split(ho, "\n")
	if len(cl) != len(hl) {
		t.Fatalf("probe lines: cold %d, warm %d", len(cl), len(hl))
	}
	for i := range cl {
		if cl[i] != hl[i] && slotDifferences[cl[i]] == "" {
			t.Errorf("probe line %d: cold %q, warm %q", i, cl[i], hl[i])
		}
	}
}

// execIn runs sh -c script in container id as its user and returns its exit code.
func execIn(t *testing.T, cli *client.Client, id, script string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	x, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"sh", "-c", script}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec in the slot: %v", err)
	}
	a, err := cli.ExecAttach(ctx, x.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec in the slot: %v", err)
	}
	out, _ := io.ReadAll(a.Reader)
	a.Close()
	t.Logf("exec %q in the slot: %q", script, out)
	for {
		r, err := cli.ExecInspect(ctx, x.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatalf("exec in the slot: %v", err)
		}
		if !r.Running {
			return r.ExitCode
		}
		time.Sleep(50 * time.Millisecond)
	}
}
