package dispatch_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam38_WarmStagedTreeHiddenFromNext (warm slots that stage
// ahead): a claimed slot's staging tree (the dispatch's workspace, out, bundle, bound under the
// slot's directory) now stays mounted on the host after the dispatch ends, until the slot's
// teardown in the background, and the dispatch's uid goes back to the pool meanwhile. The
// next dispatch of the target, which claims the next slot or starts cold as a uid that may be
// the same, runs at once: it finds nothing of the previous one's files in its sandbox (its
// /agora, /tmp, /dev/shm), and no mount of the previous dispatch's (its stage, named by its
// id) is in its mount table.
func TestRedTeam38_WarmStagedTreeHiddenFromNext(t *testing.T) {
	e, w := warmEnv(t, 1)
	var b [8]byte
	rand.Read(b[:])
	mark := "RT38WARM" + hex.EncodeToString(b[:])
	// One subagent (one shape): it writes the mark when its input says so, else it looks for it.
	half1, half2 := mark[:8], mark[8:]
	e.subagent("both", `m="`+half1+`""`+half2+`"
case "$AGORA_INPUT_JSON" in
*write*) echo "$m" > mark.txt; mkdir -p "$AGORA_OUT/outputs"; echo "$m" > "$AGORA_OUT/outputs/mark.txt"; echo "$m" > /tmp/mark; echo wrote ;;
*) id=$(printf '%s' "$AGORA_INPUT_JSON" | sed -n 's/.*probe \([0-9A-Z]*\).*/\1/p'); echo "uid=$(id -u) after=$id"
   grep -rls "$m" /agora /tmp /dev/shm 2>/dev/null | sed 's/^/found:/'
   grep -c "$id" /proc/self/mountinfo | sed 's/^/its-mounts:/'; echo probed ;;
esac`)
	if r := e.run(dispatch.Request{Subagent: "both", Input: json.RawMessage(`{"prompt":"teach"}`)}); r.State != lifecycle.DispatchFinished {
		t.Fatalf("cold: %s %s %s", r.State, r.Reason, r.Detail)
	}
	waitWarmReady(t, w, 1)
	a := e.run(dispatch.Request{Subagent: "both", Input: json.RawMessage(`{"prompt":"write"}`)})
	if a.State != lifecycle.DispatchFinished || !strings.Contains(e.stdout(a), "wrote") {
		t.Fatalf("the writer: %s %s %s", a.State, a.Reason, a.Detail)
	}
	if c := warmCounts(w); c.Claimed < 1 {
		t.Fatalf("the writer did not run in a warm slot: %+v", c)
	}
	b2 := e.run(dispatch.Request{Subagent: "both", Input: json.RawMessage(`{"prompt":"probe ` + a.ID + `"}`)})
	out := e.stdout(b2)
	t.Logf("the next dispatch's view: %s", out)
	if !strings.Contains(out, "probed") {
		t.Fatalf("the probe did not run: %s %s %s\n%s", b2.State, b2.Reason, b2.Detail, out)
	}
	if strings.Contains(out, "found:") {
		t.Errorf("the next dispatch sees the previous one's files:\n%s", out)
	}
	if !strings.Contains(out, "after="+a.ID) || !strings.Contains(out, "its-mounts:0") {
		t.Errorf("the next dispatch's mount table shows the previous one's mounts:\n%s", out)
	}
}
