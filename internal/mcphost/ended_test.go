package mcphost

import (
	"fmt"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestEndedRecords keeps terminal records only, and at most maxEndedRecords, the oldest
// forgotten first.
func TestEndedRecords(t *testing.T) {
	var c endedRecords
	live := &mcpserver.Record{ID: "live", State: "started"}
	if got := c.put(live); got != live || c.get("live") != nil {
		t.Fatalf("a live record was kept: put = %v, get = %v", got, c.get("live"))
	}
	for i := range maxEndedRecords + 1 {
		c.put(&mcpserver.Record{ID: fmt.Sprint(i), Done: true})
	}
	if c.get("0") != nil {
		t.Error("the oldest ended record is still kept past the bound")
	}
	if r := c.get("1"); r == nil || r.ID != "1" {
		t.Errorf("get(1) = %v, want the second record", r)
	}
	again := &mcpserver.Record{ID: "1", Done: true, State: "cancelled"}
	c.put(again)
	if c.get("1") != again || len(c.order) != maxEndedRecords {
		t.Errorf("putting a kept id again: get = %v, %d ids kept; want the new record and %d ids", c.get("1"), len(c.order), maxEndedRecords)
	}
}
