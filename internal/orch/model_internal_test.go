package orch

import (
	"testing"
	"unsafe"
)

// TestTask_Size holds a task node to the 192-byte size class: a run keeps one for each of
// its tasks (up to 100,000) for as long as it is open, and a field that grows it moves the
// whole run to the next class (208 bytes) or past it.
func TestTask_Size(t *testing.T) {
	if got, want := unsafe.Sizeof(task{}), uintptr(192); got > want {
		t.Errorf("a task node is %d bytes, want at most %d: put what few tasks hold in rare or ext", got, want)
	}
}

// TestTask_SetRare shares noRare while a task holds none of its rare fields, and again once
// it holds none after holding some.
func TestTask_SetRare(t *testing.T) {
	x := &task{ext: noExt, rare: noRare}
	x.setReason("", "")
	x.setQuestion("")
	if x.rare != noRare {
		t.Fatal("setting empty fields made the task its own rare fields")
	}
	x.setReason("failed", "exit 1")
	if x.rare == noRare || x.reason != "failed" || x.detail != "exit 1" {
		t.Fatalf("got reason %q detail %q (own: %v), want failed, exit 1 in the task's own", x.reason, x.detail, x.rare != noRare)
	}
	x.setReason("", "")
	if x.rare != noRare {
		t.Error("a task that holds no rare field any more keeps its own")
	}
	if *noRare != (rare{}) {
		t.Error("noRare was written")
	}
}
