package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
)

// A schedule's name and a scheduled run's id (NAME@SLOT, the slot in UTC) are read exactly:
// nothing else with an '@' is a run id.
func TestScheduleArgs(t *testing.T) {
	tests := []struct {
		tool, args, err string
	}{
		{"agora_orchestrator_schedule_show", `{"name":"nightly"}`, ""},
		{"agora_orchestrator_schedule_show", `{"name":"Nightly"}`, "not a schedule name"},
		{"agora_orchestrator_schedule_show", `{"name":"` + strings.Repeat("n", 64) + `"}`, "not a schedule name"},
		{"agora_orchestrator_schedule_show", `{}`, `"name" is required`},
		{"agora_orchestrator_schedule_show", `{"name":"n","Name":"m"}`, `unknown argument "Name"`},
		{"agora_orchestrator_schedules_list", `{}`, ""},
		{"agora_orchestrator_schedules_list", `{"name":"n"}`, "name"},
		{"agora_orchestrator_status", `{"run_id":"nightly@2026-11-24T01:00:00Z"}`, ""},
		{"agora_orchestrator_status", `{"run_id":"` + strings.Repeat("n", 63) + `@2026-11-24T01:00:00Z"}`, ""},
		{"agora_orchestrator_status", `{"run_id":"nightly@2026-11-24T01:00:00+01:00"}`, "not a run id"},
		{"agora_orchestrator_status", `{"run_id":"nightly@yesterday"}`, "not a run id"},
		{"agora_orchestrator_status", `{"run_id":"a@b@2026-11-24T01:00:00Z"}`, "not a run id"},
		{"agora_orchestrator_watch", `{"run_id":"nightly@2026-11-24T01:00:00Z","timeout_seconds":5}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.tool+tt.args, func(t *testing.T) {
			var tl *tool
			for i := range tools() {
				if tools()[i].name == tt.tool {
					tl = &tools()[i]
				}
			}
			if tl == nil {
				t.Fatalf("no tool %s", tt.tool)
			}
			_, err := tl.decode(json.RawMessage(tt.args))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("decode: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("decode = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}
