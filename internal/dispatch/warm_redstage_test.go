package dispatch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// Attacks on the stage ahead (warm bubblewrap slots of a root agora that make their claim's
// directories at fill). Each test is an attack; its comment says what must hold.

// TestRedStage_RepoWarmAsCold: a dispatch on a repository runs in a staged slot as it runs
// cold. The host checks the revision out into the workspace as root; the slot made that
// directory at fill and gave it to the sandbox uid, and git (as root) refuses a repository
// another user owns ("dubious ownership"): the warm dispatch failed where the cold one
// finished. The workspace's mode the agent sees is the cold one's too.
func TestRedStage_RepoWarmAsCold(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 64 << 20 })
	repo := gitRepo(t, map[string]string{"a.txt": "hello\n"})
	e.subagent("repo", `stat -c 'ws:%a:%u' /agora/workspace /agora/out; cat a.txt; echo made >> a.txt`)
	cold := e.run(dispatch.Request{Subagent: "repo", Repo: repo})
	wantFinished(t, cold)
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "repo", Repo: repo})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	if hot.State != cold.State || hot.Reason != cold.Reason {
		t.Fatalf("warm %s %s %q; cold %s %s", hot.State, hot.Reason, hot.Detail, cold.State, cold.Reason)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	if co != ho || !strings.Contains(co, "hello") {
		t.Errorf("the sandbox shows other than cold:\ncold %q\nwarm %q", co, ho)
	}
	if e.patch(hot) != e.patch(cold) || !strings.Contains(e.patch(hot), "+made") {
		t.Errorf("patch warm %q, cold %q", e.patch(hot), e.patch(cold))
	}
}

// stagePlants leaves in the out directory what the host must never follow or take as an
// output: links out of the stage (to the slot's own files beside it, where a warm stage
// lives, and to the workspace), a FIFO, a hard link, a setuid copy, a device node; and one
// plain output and a workspace file for the patch.
const stagePlants = `mkdir -p /agora/out/outputs && cd /agora/out/outputs
ln -s ../../../task task; ln -s ../../../../hold hold; ln -s ../../../../.. up; ln -s /agora/workspace ws
mkfifo fifo
echo kept > kept.txt; echo twice > once.txt; ln once.txt twice.txt
cp /bin/true suid && chmod 4755 suid && stat -c 'suid:%a' suid
mknod dev c 1 3 2>/dev/null; echo "mknod=$?"
echo made > /agora/workspace/made.txt`

// TestRedStage_PlantsAndRecordAsCold: an agent that plants links, a FIFO, a hard link, a
// setuid file and a device in the out directory of a staged slot (whose host path is the
// slot's, beside its task and hold files) gets exactly what a cold one gets: the same end,
// outputs, stdout and patch, the same record fields set, and the same
// audit kinds in the same order. Nothing of the slot's files becomes an output.
func TestRedStage_PlantsAndRecordAsCold(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 64 << 20 })
	e.subagent("plant", stagePlants)
	cold := e.run(dispatch.Request{Subagent: "plant"})
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "plant"})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	wantFinished(t, cold)
	if hot.State != cold.State || hot.Reason != cold.Reason || hot.Detail != cold.Detail || hot.Isolation != cold.Isolation {
		t.Fatalf("warm %s %s %q %q; cold %s %s %q %q", hot.State, hot.Reason, hot.Detail, hot.Isolation, cold.State, cold.Reason, cold.Detail, cold.Isolation)
	}
	if co, ho := e.stdout(cold), e.stdout(hot); co != ho || !strings.Contains(co, "suid:4755") {
		t.Errorf("stdout cold %q, warm %q", co, ho)
	}
	outs := func(r *dispatch.Record) string {
		var b strings.Builder
		for _, o := range r.Result.Outputs {
			fmt.Fprintf(&b, "%s %d %s\n", o.Path, o.Size, o.Digest)
		}
		return b.String()
	}
	co, ho := outs(cold), outs(hot)
	t.Logf("outputs:\n%s", ho)
	if co != ho {
		t.Errorf("outputs cold:\n%s\nwarm:\n%s", co, ho)
	}
	for _, o := range hot.Result.Outputs {
		if o.Path != "kept.txt" && o.Path != "suid" {
			t.Errorf("the host took %s as an output", o.Path)
		}
	}
	if e.patch(hot) != e.patch(cold) || !strings.Contains(e.patch(hot), "+made") {
		t.Errorf("patch warm %q, cold %q", e.patch(hot), e.patch(cold))
	}
	if cf, hf := setFields(t, cold), setFields(t, hot); !slices.Equal(cf, hf) {
		t.Errorf("record fields differ:\ncold: %v\nwarm: %v", cf, hf)
	}
	kinds := func(r *dispatch.Record) []string {
		var out []string
		for _, a := range e.audited(r, "") {
			out = append(out, a.Kind)
		}
		return out
	}
	if ck, hk := kinds(cold), kinds(hot); !slices.Equal(ck, hk) || len(hk) < 3 {
		t.Errorf("audit kinds differ:\ncold: %v\nwarm: %v", ck, hk)
	}
}

// quotaTricks tries to get past the disk quota without writing its size: fallocate beyond it,
// a sparse file written far past it, as many files as the file system takes.
const quotaTricks = `cd /agora/workspace
fallocate -l 64M big 2>/dev/null; echo "fallocate=$?"; rm -f big
truncate -s 15M sparse; echo "truncate=$?"
dd if=/dev/zero of=sparse bs=1M seek=14 count=32 conv=notrunc 2>/dev/null; echo "dd=$?"; rm -f sparse
i=0; while : > f$i 2>/dev/null; do i=$((i+1)); done; echo "files=$i"`

// TestRedStage_QuotaTricksAsCold: the quota a slot made at fill binds fallocate, a sparse
// file written past its size and a flood of empty files as the cold quota does: the same
// refusals, the same number of files, the same end (limit-exceeded, the cold detail).
func TestRedStage_QuotaTricksAsCold(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	e.subagent("tricks", quotaTricks)
	cold := e.run(dispatch.Request{Subagent: "tricks"})
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "tricks"})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	// The flood's count is printed only when the file system refused a file before the
	// host's limit stopped the sandbox: it is compared when both printed it.
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold:\n%swarm:\n%s", co, ho)
	if strings.Contains(co, "files=") != strings.Contains(ho, "files=") {
		co, _, _ = strings.Cut(co, "files=")
		ho, _, _ = strings.Cut(ho, "files=")
	}
	if co != ho {
		t.Errorf("the quota bound otherwise:\ncold %q\nwarm %q", co, ho)
	}
	for _, want := range []string{"fallocate=1", "truncate=0", "dd=1"} {
		if !strings.Contains(ho, want+"\n") {
			t.Errorf("warm: want %s in %q", want, ho)
		}
	}
	if hot.State != lifecycle.DispatchFailed || hot.Reason != lifecycle.ReasonLimitExceeded || hot.Detail != cold.Detail || hot.Reason != cold.Reason {
		t.Errorf("warm %s %s %q; cold %s %s %q", hot.State, hot.Reason, hot.Detail, cold.State, cold.Reason, cold.Detail)
	}
}

// TestRedStage_VerifyGateAsCold: a staged dispatch's verify gate builds its tree beside the
// workspace, which is now on the slot's quota, and runs it as a cold dispatch's does: the
// same verdict and output (the tree holds the base and the patch, nothing of the agent's
// workspace beyond it: a link the agent left to the stage's neighbours reads nothing), the
// same end.
func TestRedStage_VerifyGateAsCold(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 64 << 20 })
	repo := gitRepo(t, map[string]string{"a.txt": "hello\n"})
	e.subagent("gated", `echo more >> a.txt; ln -s ../../../task task; ln -s ../out out; echo side > /agora/out/side`)
	check := &verdict.Spec{Command: []string{"sh", "-c", "cat a.txt; cat task out/side 2>&1 | sed 's/^cat: //'; ls -A; stat -c %a ."}}
	cold := e.run(dispatch.Request{Subagent: "gated", Repo: repo, Verify: check})
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "gated", Repo: repo, Verify: check})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	wantFinished(t, cold)
	if hot.State != cold.State || hot.Reason != cold.Reason || hot.Detail != cold.Detail {
		t.Fatalf("warm %s %s %q; cold %s %s %q", hot.State, hot.Reason, hot.Detail, cold.State, cold.Reason, cold.Detail)
	}
	if hot.Verdict == nil || cold.Verdict == nil {
		t.Fatalf("verdicts: cold %+v, warm %+v", cold.Verdict, hot.Verdict)
	}
	t.Logf("gate output: %q", hot.Verdict.OutputTail)
	if hot.Verdict.Passed != cold.Verdict.Passed || hot.Verdict.OutputTail != cold.Verdict.OutputTail || !strings.Contains(hot.Verdict.OutputTail, "more") {
		t.Errorf("verdict warm %+v\ncold %+v", *hot.Verdict, *cold.Verdict)
	}
	if strings.Contains(hot.Verdict.OutputTail, "side") && !strings.Contains(hot.Verdict.OutputTail, "No such file") {
		t.Errorf("the gate read the agent's out directory through its link: %q", hot.Verdict.OutputTail)
	}
}

// neighbourProbe counts the slot quotas the sandbox's mount table shows (its own, when
// staged, and no other), names its workspace's file system and lists what it starts with.
const neighbourProbe = `awk '{for(i=7;i<=NF;i++) if($i=="-") print $(i+2)}' /proc/self/mountinfo | grep '^agora-slot-' | sort -u | wc -l | sed 's/^/slots:/'
awk '$5=="/agora/workspace" {for(i=7;i<=NF;i++) if($i=="-") print "src:" $(i+2)}' /proc/self/mountinfo | sed 's/slot-[0-9]*$/slot-N/'
ls -A /agora/workspace /agora/out | tr '\n' ' '; echo
echo mine > /agora/workspace/mine.txt`

// TestRedStage_NeighbourAndMisfit: a dispatch in a staged slot, while the pool's other slot
// waits with its stage made, sees one slot quota, its own; a dispatch of another shape takes
// that other slot's stage, is refused the claim and runs cold on the stage, which is empty of
// anything before it; when the pools close no slot directory, mount or held stage is left.
func TestRedStage_NeighbourAndMisfit(t *testing.T) {
	e, w := warmEnv(t, 2)
	e.setTarget(func(tg *config.Target) { tg.Disk = 32 << 20 })
	e.subagent("nb", neighbourProbe)
	cold := e.run(dispatch.Request{Subagent: "nb"})
	wantFinished(t, cold)
	waitWarmReady(t, w, 2)
	hot := e.run(dispatch.Request{Subagent: "nb"})
	wantFinished(t, hot)
	misfit := e.run(dispatch.Request{Subagent: "nb", Timeout: 31 * time.Second})
	wantFinished(t, misfit)
	if c := warmCounts(w); c.Claimed != 2 || c.Cold != 1 {
		t.Fatalf("counts %+v: want the second dispatch warm and the third refused, cold", c)
	}
	co, ho, mo := e.stdout(cold), e.stdout(hot), e.stdout(misfit)
	t.Logf("cold:\n%swarm:\n%smisfit:\n%s", co, ho, mo)
	for name, out := range map[string]string{"warm": ho, "misfit": mo} {
		if !strings.HasPrefix(out, "slots:1\nsrc:agora-slot-N\n") {
			t.Errorf("%s: not on exactly its own slot's quota:\n%s", name, out)
		}
		if !strings.Contains(out, "\n/agora/out:  /agora/workspace: \n") || strings.Contains(out, "mine.txt") {
			t.Errorf("%s: its stage did not start empty:\n%s", name, out)
		}
	}
	if !strings.HasPrefix(co, "slots:0\nsrc:agora-"+cold.ID+"\n") {
		t.Errorf("cold: %s", co)
	}
	for _, r := range []*dispatch.Record{hot, misfit} {
		if r.Isolation != cold.Isolation || e.patch(r) != e.patch(cold) {
			t.Errorf("%s: isolation %q patch %q; cold %q %q", r.ID, r.Isolation, e.patch(r), cold.Isolation, e.patch(cold))
		}
	}
	w.Close()
	warmRoot := filepath.Join(e.home.Dir, home.DispatchDir, ".warm")
	if m := agoratest.MountsUnder(t, warmRoot); len(m) > 0 {
		t.Errorf("mounts left of the closed pools' slots: %v", m)
	}
	if dirs, _ := filepath.Glob(filepath.Join(warmRoot, config.DefaultTarget, "slot-*")); len(dirs) > 0 {
		t.Errorf("slot directories left after Close: %v", dirs)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.home.Dir, home.DispatchDir, ".held")); len(ents) > 0 {
		t.Errorf("held stages left: %v", ents)
	}
}

// TestRedStage_MountTableAsDocumented: what a staged dispatch's mount table shows of /agora
// differs from a cold one's only as docs/providers.md says: /agora's own mount (every warm
// slot's claim root, stacked on the slot's claim directory, which may show too; a cold
// sandbox's bind tree), the quota's name
// (agora-slot-N, not agora- and the dispatch id) and where its bundle and capability files are
// bound from (the slot's stage, where a cold root sandbox's are on a tmpfs of their own). The
// paths name the target, so the docs must list them.
func TestRedStage_MountTableAsDocumented(t *testing.T) {
	e, w := warmEnv(t, 1)
	e.setTarget(func(tg *config.Target) { tg.Disk = 16 << 20 })
	e.subagent("mi", `awk '$5 ~ /^\/agora/ {for(i=7;i<=NF;i++) if($i=="-") print $4, $5, $(i+1), $(i+2)}' /proc/self/mountinfo`)
	cold := e.run(dispatch.Request{Subagent: "mi"})
	waitWarmReady(t, w, 1)
	hot := e.run(dispatch.Request{Subagent: "mi"})
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the second dispatch did not run in the slot", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold %s:\n%swarm %s:\n%s", cold.ID, co, hot.ID, ho)
	var warmOnly []string
	norm := strings.Builder{}
	slotPath := regexp.MustCompile(`/\.warm/` + regexp.QuoteMeta(config.DefaultTarget) + `/slot-[0-9]+/stage/`)
	// The /agora the worker started from: the slot's own claim directory, which the claim
	// tmpfs is stacked on (docs/providers.md: mountinfo lists /agora twice). The table shows
	// it while the kernel still has it there, which a loaded run may catch.
	slotBase := regexp.MustCompile(`^/\S*/\.warm/` + regexp.QuoteMeta(config.DefaultTarget) + `/slot-[0-9]+/claim /agora `)
	var bases int
	for l := range strings.Lines(ho) {
		if strings.HasPrefix(l, "/ /agora ") {
			warmOnly = append(warmOnly, l) // the claim root: every warm slot's
			continue
		}
		if slotBase.MatchString(l) {
			bases++
			continue
		}
		l = slotPath.ReplaceAllString(l, "/"+hot.ID+"/")
		l = regexp.MustCompile(`agora-slot-[0-9]+`).ReplaceAllString(l, "agora-"+hot.ID)
		norm.WriteString(pinnedPlace(strings.ReplaceAll(l, hot.ID, "ID")))
	}
	if len(warmOnly) != 1 || bases > 1 {
		t.Errorf("the warm sandbox's claim root: %q, and %d claim directories under it", warmOnly, bases)
	}
	var want strings.Builder
	var trees int
	for l := range strings.Lines(strings.ReplaceAll(co, cold.ID, "ID")) {
		if strings.HasPrefix(l, "/tree /agora tmpfs agora-sandbox") {
			trees++ // a cold run-as sandbox's /agora: its binds' tree (compute/local's bindSources)
			continue
		}
		want.WriteString(pinnedPlace(l))
	}
	if trees != 1 {
		t.Errorf("the cold sandbox's /agora: %d bind trees, want 1:\n%s", trees, co)
	}
	if want.String() != norm.String() || !strings.Contains(want.String(), "/agora/bundle") {
		t.Errorf("the warm mount table differs beyond the documented:\ncold %q\nwarm %q", want.String(), norm.String())
	}
}

// pinnedPlace keeps only the place of a mount table line of the bundle or the capability
// files: a cold root sandbox's are on the pinned content's tmpfs (agora-pinned- and the
// dispatch id), a warm slot's on its stage directory's filesystem, as docs/providers.md says.
func pinnedPlace(l string) string {
	f := strings.Fields(l)
	if len(f) == 4 && (f[1] == "/agora/bundle" || f[1] == "/agora/capabilities") {
		return f[1] + "\n"
	}
	return l
}
