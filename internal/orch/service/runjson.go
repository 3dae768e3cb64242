package service

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/agora-dev/agora/internal/orch/api"
)

// A run's status holds every task's view: at 100,000 tasks the views are tens of MB, and
// encoding the run in one piece held as much again in the encoder's buffer, grown by
// doubling, beside them (serve's peak RSS 275-280 MB for the status of a failed 100k run,
// against a 200 MB target). So a run is written in parts: its fields without the tasks, then
// the tasks one at a time through a buffered writer. The bytes decode to the same run; the
// tasks come last among its fields.

// encodeRun writes run's JSON to w, its tasks one at a time.
func encodeRun(w io.Writer, run api.Run) error {
	tasks := run.Tasks
	run.Tasks = nil
	head, err := json.Marshal(run)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if len(tasks) == 0 {
		bw.Write(head)
		return bw.Flush()
	}
	head = bytes.TrimSuffix(head, []byte("}"))
	bw.Write(head)
	if len(head) > 1 { // more than the opening brace
		bw.WriteByte(',')
	}
	bw.WriteString(`"tasks":[`)
	// Each task through one buffer, its encoder's newline dropped: a watch line is one line.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range tasks {
		if i > 0 {
			bw.WriteByte(',')
		}
		buf.Reset()
		if err := enc.Encode(&tasks[i]); err != nil {
			return err
		}
		bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	bw.WriteString("]}")
	return bw.Flush()
}

// writeRun answers with run as writeJSON would, its tasks encoded one at a time.
func writeRun(w http.ResponseWriter, status int, run api.Run) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if encodeRun(w, run) == nil {
		io.WriteString(w, "\n")
	}
}

// sendRun writes one watch line holding run ({"run": ...}, with "lagged": true when lagged).
func sendRun(w io.Writer, run api.Run, lagged bool) error {
	if lagged {
		if _, err := io.WriteString(w, `{"lagged":true,"run":`); err != nil {
			return err
		}
	} else if _, err := io.WriteString(w, `{"run":`); err != nil {
		return err
	}
	if err := encodeRun(w, run); err != nil {
		return err
	}
	_, err := io.WriteString(w, "}\n")
	return err
}
