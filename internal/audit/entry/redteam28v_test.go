package entry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// The readers as 99408dd wrote them, before the typed views: obs's str and num, web's str.
func oldObsStr(v any) string { s, _ := v.(string); return s }

func oldObsNum(v any) float64 {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	x, err := n.Float64()
	if err != nil || x < 0 {
		return 0
	}
	return x
}

func oldWebStr(m map[string]any, k string) string {
	if v, ok := m[k]; ok && v != nil {
		if s, ok := v.(string); ok {
			return s
		}
		return fmt.Sprint(v)
	}
	return ""
}

// decodeLikeObs decodes details as obs's feed does (encoding/json with UseNumber).
func decodeLikeObs(t *testing.T, raw string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	var d map[string]any
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return d
}

// hostileDetails are details a model or agent can shape through a gateway, tool-call or egress
// entry: wrong types, numbers past float64 and int64, negative and fractional counts, NaN and
// Infinity as strings, nested objects, duplicate keys (the last wins in encoding/json, as before).
var hostileDetails = []string{
	`{}`,
	`{"route":"r","decision":"allowed","model":"m","input_tokens":12,"output_tokens":3,"cached_tokens":0,"cost_nano_usd":99,"count":2}`,
	`{"route":1,"decision":{"a":1},"model":["m"],"input_tokens":"12","output_tokens":null,"cached_tokens":true,"count":"NaN"}`,
	`{"input_tokens":1e400,"output_tokens":-1e400,"cached_tokens":-0,"cost_nano_usd":1e308,"count":0.5}`,
	`{"input_tokens":-5,"count":-3,"output_tokens":"Infinity","cost_nano_usd":"NaN"}`,
	`{"input_tokens":123456789012345678901234567890,"count":1e-400}`,
	`{"route":"a","route":"b","decision":"denied","decision":"allowed","input_tokens":1,"input_tokens":-1}`,
	`{"tool":{"nested":{"deep":[1,2,{"x":null}]}},"decision":null,"reason":12.5,"phase":false,"extra":"e","Tool":"case"}`,
	`{"host":"h","port":443,"via":"proxy","method":"GET","path":"/\u0000","bytes_up":1e400,"bytes_down":-1,"duration_ms":"NaN","requests":[1]}`,
	`{"host":null,"port":"x","decision":"allowed","decision":"denied","HOST":"upper"}`,
}

// The typed readers read hostile details exactly as 99408dd's obs and web
// readers did, and never panic.
func TestRedTeam28V_TypedReadersMatchTheOldReaders(t *testing.T) {
	for _, raw := range hostileDetails {
		d := decodeLikeObs(t, raw)

		g := entry.ReadGatewayCall(d)
		count := oldObsNum(d["count"])
		if count < 1 {
			count = 1
		}
		_, usage := d["input_tokens"]
		want := entry.GatewayCall{Route: oldObsStr(d["route"]), Decision: oldObsStr(d["decision"]), Model: oldObsStr(d["model"]),
			Usage: usage, InputTokens: oldObsNum(d["input_tokens"]), OutputTokens: oldObsNum(d["output_tokens"]),
			CachedTokens: oldObsNum(d["cached_tokens"]), CostNanoUSD: oldObsNum(d["cost_nano_usd"]), Count: count}
		if g != want {
			t.Errorf("%s: ReadGatewayCall = %+v, the old obs reading %+v", raw, g, want)
		}
		for _, x := range []float64{g.InputTokens, g.OutputTokens, g.CachedTokens, g.CostNanoUSD, g.Count} {
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("%s: ReadGatewayCall = %+v: a counter would take %v", raw, g, x)
			}
		}

		td := entry.ReadToolDecision(d)
		rest := map[string]any{}
		for k, v := range d {
			switch k {
			case "tool", "decision", "reason", "phase":
			default:
				rest[k] = v
			}
		}
		wantTD := entry.ToolDecision{Tool: oldWebStr(d, "tool"), Decision: oldWebStr(d, "decision"), Reason: oldWebStr(d, "reason"),
			Phase: oldWebStr(d, "phase"), Rest: rest}
		if !reflect.DeepEqual(td, wantTD) {
			t.Errorf("%s: ReadToolDecision = %+v, the old web reading %+v", raw, td, wantTD)
		}

		n := entry.ReadNet(d)
		wantN := entry.Net{Host: oldWebStr(d, "host"), Port: oldWebStr(d, "port"), Decision: oldWebStr(d, "decision"),
			Reason: oldWebStr(d, "reason"), Via: oldWebStr(d, "via"), Method: oldWebStr(d, "method"), Path: oldWebStr(d, "path"),
			BytesUp: oldWebStr(d, "bytes_up"), BytesDown: oldWebStr(d, "bytes_down"), DurationMS: oldWebStr(d, "duration_ms"),
			Requests: oldWebStr(d, "requests")}
		if n != wantN {
			t.Errorf("%s: ReadNet = %+v, the old web reading %+v", raw, n, wantN)
		}
	}
}

// Num on in-memory values (an entry not yet decoded) never hands a
// counter a negative, NaN or infinite value, nor a nil map a panic.
func TestRedTeam28V_NumInMemoryValues(t *testing.T) {
	for _, v := range []any{nil, int(-1), int64(math.MinInt64), math.NaN(), math.Inf(1), math.Inf(-1), -0.0, "7",
		json.Number("NaN"), json.Number("Inf"), json.Number("-Infinity"), json.Number("0x10"), json.Number(""), uint64(7), float32(1)} {
		x := entry.Num(map[string]any{"k": v}, "k")
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			t.Errorf("Num(%#v) = %v", v, x)
		}
	}
	if entry.Num(nil, "k") != 0 || entry.Text(nil, "k") != "" || entry.ReadGatewayCall(nil).Count != 1 {
		t.Error("a nil details map read as something")
	}
}

// FuzzRedTeam28VTypedReaders: any details JSON decoded as obs decodes it reads without a panic
// and as the old obs reader read the gateway numbers.
func FuzzRedTeam28VTypedReaders(f *testing.F) {
	for _, raw := range hostileDetails {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
		dec.UseNumber()
		var d map[string]any
		if dec.Decode(&d) != nil {
			return
		}
		g := entry.ReadGatewayCall(d)
		_ = entry.ReadToolDecision(d)
		_ = entry.ReadNet(d)
		if g.InputTokens != oldObsNum(d["input_tokens"]) || g.CostNanoUSD != oldObsNum(d["cost_nano_usd"]) {
			t.Fatalf("%s: %+v differs from the old reading", raw, g)
		}
	})
}
