package strictjson_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/strictjson"
)

// Every way a []byte can be reached
// (named types, pointers, maps, arrays of them, embedded fields) keeps the one spelling, and
// the spelling that is not a string at all, a JSON array of numbers, which encoding/json also
// decodes into a []byte, is refused.

type rt46cBlob []byte

type rt46cInner struct {
	E []byte `json:"e"`
}

type rt46cDoc struct {
	B   []byte              `json:"b,omitempty"`
	N   rt46cBlob           `json:"n,omitempty"`
	P   *[]byte             `json:"p,omitempty"`
	M   map[string][]byte   `json:"m,omitempty"`
	A   [2][]byte           `json:"a"`
	U   []uint8             `json:"u,omitempty"`
	PP  **rt46cBlob         `json:"pp,omitempty"`
	MS  map[string]rt46cDoc `json:"ms,omitempty"`
	Any any                 `json:"any,omitempty"`
	rt46cInner
}

// TestRedTeam46c_BytesEveryPath: a non-canonical spelling is refused wherever the []byte is.
func TestRedTeam46c_BytesEveryPath(t *testing.T) {
	var d rt46cDoc
	if err := strictjson.Unmarshal([]byte(`{"b":"QUJD","n":"QQ==","p":"QQ==","m":{"k":"QQ=="},"a":["QQ==",""],"u":"QQ==","pp":"QQ==","ms":{"x":{"b":"QQ==","a":[null,null]}},"e":"QQ=="}`), &d); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	for _, bad := range []string{
		`{"n":"QR=="}`,
		`{"p":"QR=="}`,
		`{"m":{"k":"QR=="}}`,
		`{"a":["QR==",""]}`,
		`{"u":"QR=="}`,
		`{"pp":"QR=="}`,
		`{"ms":{"x":{"b":"QR=="}}}`,
		`{"e":"QR=="}`,
		`{"e":"Q\u0051=="}`,
	} {
		var d rt46cDoc
		if err := strictjson.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s: accepted, want refused as not one spelling", bad)
		}
	}
}

// TestRedTeam46c_BytesAsNumberArray: encoding/json reads [65,66,67] into a []byte as "QUJD"
// reads; strictjson must refuse the array (or the same bytes have two spellings).
func TestRedTeam46c_BytesAsNumberArray(t *testing.T) {
	for _, bad := range []string{
		`{"b":[65,66,67]}`,
		`{"b":[]}`,     // the empty byte string, spelled "" canonically
		`{"b":[null]}`, // one zero byte: [0], "AA==" and [null] all read alike
		`{"n":[65]}`,
		`{"p":[65]}`,
		`{"m":{"k":[65]}}`,
		`{"u":[65]}`,
		`{"e":[65]}`,
	} {
		var d rt46cDoc
		err := strictjson.Unmarshal([]byte(bad), &d)
		if err == nil {
			t.Errorf("%s: accepted (b=%q n=%q u=%q e=%q), want refused: a byte string is one base64 string", bad, d.B, d.N, d.U, d.E)
		} else if !strings.Contains(err.Error(), "byte string") {
			t.Logf("%s: refused with %v", bad, err)
		}
	}
}
