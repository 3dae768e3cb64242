// Package recordfuzz fuzzes a dispatch record's JSON (tests only). It is a package of its
// own, apart from internal/dispatch, whose test files link a Kubernetes control plane and
// the container providers: a fuzz binary instruments everything it links, and this one links
// only the dispatch package, which other fuzz binaries link already.
package recordfuzz

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
)

// FuzzRecordJSON: any bytes either fail to decode as a record or decode without a panic, and a
// decoded record shows as JSON that decodes to the same shown JSON again.
func FuzzRecordJSON(f *testing.F) {
	f.Add([]byte(`{"id":"d1","state":"finished","timeout_seconds":60,"patch":{"digest":"sha256:ab","size":1},"outputs":[]}`))
	f.Add([]byte(`{"timeout":"30m0s","result":{"patch":null},"outputs":null,"needs_input":{"question":"q"}}`))
	f.Add([]byte(`{"timeout_seconds":-9223372036854775808,"done":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r dispatch.Record
		if json.Unmarshal(b, &r) != nil {
			return
		}
		once, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		var again dispatch.Record
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatalf("a shown record does not decode: %v\n%s", err, once)
		}
		twice, err := json.Marshal(again)
		if err != nil || string(once) != string(twice) {
			t.Fatalf("showing is not stable:\n%s\n%s", once, twice)
		}
	})
}
