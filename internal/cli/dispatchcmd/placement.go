package dispatchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
)

// placementTimeout bounds describe's question to the cluster or engine: an unreachable
// apiserver costs a line in the output, not a hung command.
const placementTimeout = 10 * time.Second

// describeOutput is `agora dispatch describe`'s result: the record's fields, and where its
// process runs as the target's provider sees it now (absent for local targets).
type describeOutput struct {
	*dispatch.Record
	Placement      *compute.Placement `json:"placement,omitempty"`
	PlacementError string             `json:"placement_error,omitempty"`
}

// MarshalJSON is the record's shown JSON with the placement fields added: the record's own
// MarshalJSON, promoted through the embedding, would otherwise drop them.
func (o describeOutput) MarshalJSON() ([]byte, error) {
	rec, err := json.Marshal(o.Record)
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(struct {
		Placement      *compute.Placement `json:"placement,omitempty"`
		PlacementError string             `json:"placement_error,omitempty"`
	}{o.Placement, o.PlacementError})
	if err != nil {
		return nil, err
	}
	if string(extra) == "{}" || len(rec) < 2 || rec[len(rec)-1] != '}' {
		return rec, nil
	}
	return append(append(rec[:len(rec)-1:len(rec)-1], ','), extra[1:]...), nil
}

// placementOf asks the dispatch's provider where it runs. A failure is reported beside the
// record, not instead of it: the record is what describe is for.
func placementOf(ctx context.Context, d *dispatch.Dispatcher, r *dispatch.Record) (*compute.Placement, string) {
	ctx, cancel := context.WithTimeout(ctx, placementTimeout)
	defer cancel()
	pl, err := d.Placement(ctx, r)
	if err != nil {
		return nil, err.Error()
	}
	return pl, ""
}

// printPlacement writes the placement lines of describe for people.
func printPlacement(w io.Writer, o describeOutput) {
	if o.PlacementError != "" {
		fmt.Fprintf(w, "placement: unknown (%s)\n", cmdutil.AgentText(o.PlacementError))
		return
	}
	pl := o.Placement
	if pl == nil {
		return
	}
	if pl.Gone {
		fmt.Fprintf(w, "placement: %s %s is gone (deleted after it finished, cancelled, or removed by someone else)\n", pl.Provider, cmdutil.OrDash(pl.Object))
		return
	}
	var parts []string
	for _, kv := range [][2]string{{"phase", pl.Phase}, {"node", pl.Node}, {"pod", pl.Pod}, {"reason", pl.Reason}, {"health", pl.Health}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+cmdutil.AgentText(kv[1]))
		}
	}
	if len(pl.Conditions) > 0 {
		parts = append(parts, "conditions "+cmdutil.AgentText(strings.Join(pl.Conditions, ", ")))
	}
	if len(parts) == 0 {
		parts = []string{"no pod yet"}
	}
	fmt.Fprintf(w, "placement: %s %s: %s\n", pl.Provider, pl.Object, strings.Join(parts, ", "))
}
