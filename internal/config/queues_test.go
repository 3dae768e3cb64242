package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse_Queues(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]int
		err  string
	}{
		{name: "absent: the default queue is declared", src: "", want: map[string]int{"default": DefaultQueueConcurrency}},
		{name: "others beside the implicit default", src: "queues: {nightly: {concurrency: 2}}",
			want: map[string]int{"default": DefaultQueueConcurrency, "nightly": 2}},
		{name: "the default queue declared", src: "queues: {default: {concurrency: 8}, nightly: {concurrency: 1}}",
			want: map[string]int{"default": 8, "nightly": 1}},
		{name: "zero concurrency", src: "queues: {nightly: {concurrency: 0}}", err: "queues.nightly.concurrency: want 1 to 4096, got 0"},
		{name: "concurrency left out", src: "queues: {nightly: {}}", err: "queues.nightly.concurrency: want 1 to 4096, got 0"},
		{name: "too much", src: "queues: {nightly: {concurrency: 5000}}", err: "want 1 to 4096, got 5000"},
		{name: "bad name", src: "queues: {Night.ly: {concurrency: 1}}", err: `queues.Night.ly: invalid queue name "Night.ly"`},
		{name: "unknown key", src: "queues: {nightly: {concurency: 1}}", err: "concurency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default(t.TempDir())
			err := Parse("agora.yaml", []byte(tt.src), c)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, c.QueueConcurrency()); diff != "" {
				t.Errorf("queues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfig_CheckQueue(t *testing.T) {
	c := Default(t.TempDir())
	if err := Parse("agora.yaml", []byte("queues: {nightly: {concurrency: 2}, batch: {concurrency: 1}}"), c); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckQueue("nightly"); err != nil {
		t.Errorf("CheckQueue(nightly) = %v", err)
	}
	err := c.CheckQueue("nighty")
	if want := `queue "nighty" is not declared in agora.yaml; known: batch, default, nightly`; err == nil || err.Error() != want {
		t.Errorf("CheckQueue(nighty) = %v, want %q", err, want)
	}
}
