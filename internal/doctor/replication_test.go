package doctor

import (
	"strings"
	"testing"
	"time"
)

// TestReplicationRows: doctor shows each replicated database's last position and age,
// and fails the row (not required) when the last upload failed or it is ten lags behind.
func TestReplicationRows(t *testing.T) {
	now := time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC)
	row := func(x Replication) Check {
		r := &run{}
		r.replication(Options{Replication: []Replication{x}})
		if len(r.checks) != 1 {
			t.Fatalf("%d rows", len(r.checks))
		}
		return r.checks[0]
	}
	base := Replication{DB: "agora.db", Published: true, Generation: "0188", Seq: 7, Lag: time.Second, Now: now}
	ok := base
	ok.Replicated = now.Add(-400 * time.Millisecond)
	if c := row(ok); c.Status != StatusOK || c.Required || !strings.Contains(c.Detail, "segment 7, replicated 400ms ago (lag 1s)") {
		t.Errorf("fresh: %+v", c)
	}
	stale := base
	stale.Replicated = now.Add(-11 * time.Second)
	if c := row(stale); c.Status != StatusMissing || !strings.Contains(c.Detail, "more than ten lags behind") {
		t.Errorf("stale: %+v", c)
	}
	failed := ok
	failed.Err = "s3 credentials refused"
	if c := row(failed); c.Status != StatusMissing || !strings.Contains(c.Detail, "the last upload failed: s3 credentials refused") {
		t.Errorf("failed: %+v", c)
	}
	if c := row(Replication{DB: "orch.db", Lag: time.Second, Now: now}); c.Status != StatusOK || !strings.Contains(c.Detail, "not replicated yet") {
		t.Errorf("unpublished: %+v", c)
	}
}
