package mcpserver

import (
	"strings"
	"testing"
)

// TestRedTeam29_DescribeWaitArgumentsExact: wait_seconds is read
// exactly: a second wait_seconds (spelled plainly or with an escape), another case, a
// fraction, a string, an exponent past int64, a negative or a number past 300 is refused
// naming it, never read as some other wait.
func TestRedTeam29_DescribeWaitArgumentsExact(t *testing.T) {
	tl := findTool(t, "agora_dispatch_describe")
	const id = `"id":"` + "01ARZ3NDEKTSV4RRFFQ69G5FAV" + `"`
	for _, raw := range []string{
		`{` + id + `,"wait_seconds":0,"wait_seconds":300}`,
		`{` + id + `,"wait_seconds":1,"wait_second\u0073":300}`,
		`{` + id + `,"WAIT_SECONDS":300}`,
		`{` + id + `,"Wait_Seconds":300}`,
		`{` + id + `,"wait_seconds":1.5}`,
		`{` + id + `,"wait_seconds":"10"}`,
		`{` + id + `,"wait_seconds":1e400}`,
		`{` + id + `,"wait_seconds":-1}`,
		`{` + id + `,"wait_seconds":301}`,
		`{` + id + `,"wait_seconds":18446744073709551916}`,
		`{` + id + `,"wait_seconds":true}`,
		`{` + id + `,"wait_seconds":[5]}`,
		`{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","i\u0064":"other","wait_seconds":5}`,
	} {
		v, err := tl.decode([]byte(raw))
		if err == nil {
			t.Errorf("%s was accepted as %+v", raw, v)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "wait_seconds") && !strings.Contains(msg, "twice") && !strings.Contains(msg, "unknown argument") {
			t.Errorf("%s: refused as %q, which does not name the argument", raw, msg)
		}
	}
	// The plain forms are read as written.
	for raw, want := range map[string]int64{`{` + id + `,"wait_seconds":300}`: 300, `{` + id + `,"wait_seconds":0}`: 0, `{` + id + `,"wait_seconds":-0}`: 0} {
		v, err := tl.decode([]byte(raw))
		a, ok := v.(describeArgs)
		if err != nil || !ok || a.WaitSeconds == nil || *a.WaitSeconds != want {
			t.Errorf("%s: %+v %v, want wait_seconds %d", raw, v, err, want)
		}
	}
}
