package netgw

import (
	"context"
	"net/http"
	"testing"
)

// TestRedTeam30_OneDispatchTwoSlots: the host binds one dispatch to two slots (a retry after
// a bind it thought failed, a pool bug). A dispatch's token must reach one slot only: the
// gateway hands a dispatch's session out once.
func TestRedTeam30_OneDispatchTwoSlots(t *testing.T) {
	g := withSlots(t, nil)
	s := g.exportBare(t, "01TWICE")
	a, b := newSlot(t, g), newSlot(t, g)
	ba := bindAsync(context.Background(), a, s)
	bb := bindAsync(context.Background(), b, s)
	granted := 0
	for _, sl := range []*Slot{a, b} {
		code, _ := g.do(t, http.MethodPost, claimPath(sl.ID), sl.Token, nil)
		if code == http.StatusOK {
			granted++
		}
	}
	<-ba
	<-bb
	if granted != 1 {
		t.Fatalf("one dispatch's session was handed to %d slots, want 1", granted)
	}
}
