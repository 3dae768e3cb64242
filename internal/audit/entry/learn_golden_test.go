package entry_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
)

var updateLearn = flag.Bool("update-learn", false, "write testdata/learn-log.jsonl from the literal learn entries (once, when the kinds were added)")

// learnGoldenPath pins the bytes of the learn kinds, written once by
// `go test -run TestGolden_LearnKinds -update-learn` from the literal spellings below, the
// day they were added; `agora capability suggest` reads these details.
const learnGoldenPath = "testdata/learn-log.jsonl"

// learnCases is every learn kind, spelled literally (old) and from this package (new).
func learnCases() []golden {
	const actor = "dispatch/d-1 role@sha256:ab"
	return []golden{
		{"tool would deny",
			audit.Entry{Actor: actor, Kind: "tool.would_deny", Subject: "dispatch/d-1",
				Details: d("tool", "exec", "command", "go test ./...", "reason", "command not granted", "role", "fixer", "dispatch", "d-1")},
			audit.Entry{Actor: actor, Kind: entry.ToolWouldDeny, Subject: entry.Dispatch("d-1"),
				Details: d(entry.KeyTool, "exec", entry.KeyCommand, "go test ./...", entry.KeyReason, "command not granted", entry.KeyRole, "fixer", "dispatch", "d-1")}},
		{"net would deny",
			audit.Entry{Actor: actor, Kind: "net.would_deny", Subject: "dispatch/d-1",
				Details: d("host", "api.github.com", "port", 443, "method", "POST", "path", "/repos/x", "reason", "host not granted", "role", "fixer")},
			audit.Entry{Actor: actor, Kind: entry.NetWouldDeny, Subject: entry.Dispatch("d-1"),
				Details: d(entry.KeyHost, "api.github.com", entry.KeyPort, 443, entry.KeyMethod, "POST", entry.KeyPath, "/repos/x", entry.KeyReason, "host not granted", entry.KeyRole, "fixer")}},
		{"file would deny",
			audit.Entry{Actor: actor, Kind: "file.would_deny", Subject: "dispatch/d-1",
				Details: d("path", "etc/x.conf", "op", "write", "reason", "outside the workspace", "role", "fixer")},
			audit.Entry{Actor: actor, Kind: entry.FileWouldDeny, Subject: entry.Dispatch("d-1"),
				Details: d(entry.KeyPath, "etc/x.conf", entry.KeyOp, "write", entry.KeyReason, "outside the workspace", entry.KeyRole, "fixer")}},
	}
}

// TestGolden_LearnKinds: the learn kinds' builders write the bytes pinned when they were
// added, and the typed reader gives back each field.
func TestGolden_LearnKinds(t *testing.T) {
	var olds, news []audit.Entry
	for _, c := range learnCases() {
		olds, news = append(olds, c.old), append(news, c.new)
	}
	if *updateLearn {
		_, old := writeLog(t, olds)
		if err := os.WriteFile(learnGoldenPath, append(bytes.Join(old, []byte("\n")), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(learnGoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	_, got := writeLog(t, news)
	if len(got) != len(want) {
		t.Fatalf("got %d entries, testdata holds %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: the builders write\n%s\nthe pinned bytes are\n%s", learnCases()[i].name, got[i], want[i])
		}
	}
	w, ok := entry.ReadWouldDeny(entry.NetWouldDeny, news[1].Details)
	if !ok || w.Host != "api.github.com" || w.Port != "443" || w.Method != "POST" || w.Path != "/repos/x" || w.Role != "fixer" {
		t.Errorf("ReadWouldDeny(net) = %+v, %v", w, ok)
	}
	w, ok = entry.ReadWouldDeny(entry.ToolWouldDeny, news[0].Details)
	if !ok || w.Tool != "exec" || w.Command != "go test ./..." || w.Reason != "command not granted" || w.Truncated {
		t.Errorf("ReadWouldDeny(tool) = %+v, %v", w, ok)
	}
	w, ok = entry.ReadWouldDeny(entry.FileWouldDeny, news[2].Details)
	if !ok || w.Path != "etc/x.conf" || w.Op != "write" {
		t.Errorf("ReadWouldDeny(file) = %+v, %v", w, ok)
	}
	if _, ok := entry.ReadWouldDeny(entry.ToolCall, news[0].Details); ok {
		t.Error("ReadWouldDeny read a tool.call entry as a learn entry")
	}
	for _, c := range learnCases() {
		if !strings.HasSuffix(c.new.Kind, ".would_deny") || !entry.WouldDeny(c.new.Kind) {
			t.Errorf("%s: kind %q is not a learn kind", c.name, c.new.Kind)
		}
	}
}
