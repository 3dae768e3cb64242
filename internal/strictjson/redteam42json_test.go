package strictjson_test

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/strictjson"
)

// exactFloat is the float64 nearest to the JSON number s, read exactly (big.Rat), and whether
// it is finite; ok is false for an exponent too large to read exactly here.
func exactFloat(s string) (f float64, finite, ok bool) {
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	e := 0
	if exp != "" {
		n, err := strconv.Atoi(exp)
		if err != nil || n > 20000 || n < -20000 {
			return 0, false, false
		}
		e = n
	}
	r, ok := new(big.Rat).SetString(mant + "e" + strconv.Itoa(e))
	if !ok {
		return 0, false, false
	}
	f, _ = r.Float64()
	return f, f-f == 0, true
}

// TestRedTeam42JSON_NumberStrconvMisreads: strconv.ParseFloat (encoding/json's reading) keeps
// only the first 800 digits of a number in its slow path and caps an exponent's value near
// 10000, so a number of more digits can read, in Go, as another value than its own: every
// exact reader (Python, JavaScript, big.Rat) reads 9007199254740993 followed by 790 zeros
// and a 1, times 10^-791, as 9007199254740994; Go reads 900719925.4740993. The document then
// has two readings, which strictjson exists to refuse.
func TestRedTeam42JSON_NumberStrconvMisreads(t *testing.T) {
	digits := "9007199254740993" + strings.Repeat("0", 790) + "1"
	misread := digits + "e-" + strconv.Itoa(len(digits)-16)
	var got float64
	if err := json.Unmarshal([]byte(misread), &got); err != nil {
		t.Fatal(err)
	}
	want, _, _ := exactFloat(misread)
	if got == want {
		t.Skip("SKIP: this Go's strconv reads the number exactly; the attack needs its 800-digit slow path")
	}
	for _, n := range []string{
		misread,
		// 10400 leading zeros and an exponent past strconv's cap (it stops reading an
		// exponent's digits at 10000): Go reads 0, exact readers +Inf (10^89599).
		"0." + strings.Repeat("0", 10400) + "1e100000",
	} {
		for _, doc := range []string{n, `{"a":` + n + `}`, `[1,` + n + `]`} {
			err := strictjson.Check([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), "digits") {
				t.Errorf("Check(%.40q...) = %v, want a refusal of the number's digits", doc, err)
			}
		}
		if _, err := strictjson.NewFields("a").Members([]byte(`{"a":`+n+`}`), nil); err == nil {
			t.Errorf("Members accepted %.40q...", n)
		}
	}
	// Numbers up to the limit are read exactly and stay accepted.
	for _, n := range []string{strings.Repeat("9", 300) + "." + strings.Repeat("9", 500), "0." + strings.Repeat("0", 798) + "1",
		"9007199254740993" + strings.Repeat("0", 783) + "1e-784", "-1" + strings.Repeat("0", 299) + ".5e-10"} {
		if err := strictjson.Check([]byte(n)); err != nil {
			t.Errorf("Check(%.40q...) = %v", n, err)
		}
	}
}

// FuzzRedTeam42JSON_NumberReadExactly: a number strictjson accepts is read by encoding/json as
// the float64 nearest to its exact value, the reading of every exact reader.
func FuzzRedTeam42JSON_NumberReadExactly(f *testing.F) {
	f.Add("9007199254740993", 790, "1", -791)
	f.Add("1", 10400, "1", 19000)
	f.Add("17976931348623157", 0, "", 292)
	f.Add("24703282292062327", 300, "1", -340)
	f.Fuzz(func(t *testing.T, lead string, zeros int, tail string, exp int) {
		if zeros < 0 || zeros > 12000 || len(lead)+len(tail) > 1200 {
			return
		}
		for _, s := range []string{lead, tail} {
			for _, c := range s {
				if c < '0' || c > '9' {
					return
				}
			}
		}
		if lead == "" || lead[0] == '0' {
			return
		}
		for _, n := range []string{
			lead + strings.Repeat("0", zeros) + tail + "e" + strconv.Itoa(exp),
			"0." + strings.Repeat("0", zeros) + lead + tail + "e" + strconv.Itoa(exp),
		} {
			if strictjson.Check([]byte(n)) != nil {
				continue
			}
			want, finite, ok := exactFloat(n)
			if !ok {
				continue
			}
			var got float64
			if err := json.Unmarshal([]byte(n), &got); err != nil || !finite || got != want {
				t.Fatalf("accepted %.60q... (%d bytes): encoding/json reads %v (%v), exactly it is %v", n, len(n), got, err, want)
			}
		}
	})
}
