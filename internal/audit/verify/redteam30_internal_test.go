package verify

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Attacks on the fast `agora verify` (the one-pass in-place base64, the summary
// reading of entries, the proof hash taken again by its text, the hash states reused per
// goroutine), as a forger of bundles for a third party that verifies offline. Every forged
// bundle is read by the scanner exactly as by the strict reading (matchStrict), never panics,
// and gets the verdict the pre-change binary (main at c0ed7ef, run on the same files) gave:
// refused unless the forgery changes no decoded byte.

// redTeam30Forgery is one forged bundle: the valid pre28 bundle with edit applied, and
// whether the bundle still means the same (then it verifies, with the old binary too).
type redTeam30Forgery struct {
	name string
	edit func(t *testing.T, b []byte) []byte
	same bool
}

// replaceOnce replaces the first old in b, failing the test when there is none.
func replaceOnce(t *testing.T, b []byte, old, with string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("fixture: %q not in the bundle", old)
	}
	return bytes.Replace(b, []byte(old), []byte(with), 1)
}

func rt30(old, with string) func(*testing.T, []byte) []byte {
	return func(t *testing.T, b []byte) []byte { return replaceOnce(t, b, old, with) }
}

// The pre28 bundle's first entry's leaf hash and proof hashes, and the second entry's first
// proof hash (RFC 6962: entries 0 and 1 are siblings, so each proof starts with the other's leaf).
const (
	rt30Leaf0   = `"Rg/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI="`
	rt30Proof00 = `"iVBK1D12YRjeeOZyW5z3JIrV1kzVIMgBSzHvGM5yjPE="`
	rt30Proof01 = `"RlkFcd9kiU+pRhkQlBBqtrJJ890IkgPy6DIouiFz8SM="`
	rt30Proof03 = `"z4HETAx3YrRyoJ6ypL3Qs/kMeFs8yZNgs2IjlPWk9hg="`
)

func redTeam30Forgeries() []redTeam30Forgery {
	// secondEntry returns b with the text from the second entry on edited by f.
	secondEntry := func(f func(t *testing.T, rest []byte) []byte) func(*testing.T, []byte) []byte {
		return func(t *testing.T, b []byte) []byte {
			i := bytes.Index(b, []byte(`"index": 1,`))
			if i < 0 {
				t.Fatal("fixture: no entry 1")
			}
			return append(bytes.Clone(b[:i]), f(t, b[i:])...)
		}
	}
	// entryText edits entry 0's decoded bytes and writes them back (leaf hash kept unless
	// rehash is set, then the leaf hash is that of the new bytes).
	entryText := func(from, to string, rehash bool) func(*testing.T, []byte) []byte {
		return func(t *testing.T, b []byte) []byte {
			i := bytes.Index(b, []byte(`"entry": "`)) + len(`"entry": "`)
			j := i + bytes.IndexByte(b[i:], '"')
			raw, err := base64.StdEncoding.DecodeString(string(b[i:j]))
			if err != nil {
				t.Fatal(err)
			}
			raw = replaceOnce(t, raw, from, to)
			out := append(bytes.Clone(b[:i]), base64.StdEncoding.EncodeToString(raw)...)
			out = append(out, b[j:]...)
			if rehash {
				out = replaceOnce(t, out, rt30Leaf0, `"`+base64.StdEncoding.EncodeToString(LeafHash(raw))+`"`)
			}
			return out
		}
	}
	return []redTeam30Forgery{
		{"duplicate entry key", rt30(`"index": 0,`, `"index": 0, "index": 0,`), false},
		{"duplicate entry key, other value", rt30(`"index": 0,`, `"index": 1, "index": 0,`), false},
		{"duplicate leaf_hash", rt30(`"leaf_hash": `+rt30Leaf0, `"leaf_hash": `+rt30Proof00+`, "leaf_hash": `+rt30Leaf0), false},
		{"duplicate top-level key", rt30(`"anchored": null,`, `"anchored": null, "anchored": null,`), false},
		{"entry key in other case", rt30(`"index": 0,`, `"Index": 0,`), false},
		{"leaf_hash key in other case", rt30(`"leaf_hash"`, `"Leaf_Hash"`), false},
		{"entries key in other case", rt30(`"entries"`, `"Entries"`), false},
		{"escaped entry key", rt30(`"index": 0,`, `"\u0069ndex": 0,`), true},
		{"escaped quote in a hash", rt30(rt30Leaf0, `"\u0022g/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI="`), false},
		// Another spelling of the same bytes is refused (one byte string, one spelling in
		// a bundle), by the scanner and the strict reading alike.
		{"unicode escape of a hash letter", rt30(rt30Leaf0, `"\u0052g/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI="`), false},
		{"escaped slash in a proof hash", rt30(rt30Proof03, `"z4HETAx3YrRyoJ6ypL3Qs\/kMeFs8yZNgs2IjlPWk9hg="`), false},
		{"escaped newline in a proof hash", rt30(rt30Proof01, `"RlkFcd9kiU+pRhkQ\nlBBqtrJJ890IkgPy6DIouiFz8SM="`), false},
		{"escaped letter in an entry", rt30(`"entry": "eyJh`, `"entry": "\u0065yJh`), false},
		{"escape making another letter", rt30(rt30Leaf0, `"\u0053g/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI="`), false},
		// RFC 4648 3.5: the unused low bits of the last character. encoding/json's decoder
		// (base64.StdEncoding, not Strict) ignores them; a bundle is read strictly: they
		// must be zero.
		{"non-zero trailing bits in a leaf hash", rt30(rt30Leaf0, `"Rg/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnJ="`), false},
		{"non-zero trailing bits in a proof hash", rt30(rt30Proof00, `"iVBK1D12YRjeeOZyW5z3JIrV1kzVIMgBSzHvGM5yjPF="`), false},
		{"hash without padding", rt30(rt30Leaf0, `"Rg/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI"`), false},
		{"hash with extra padding", rt30(rt30Leaf0, `"Rg/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI=="`), false},
		{"hash padded early", rt30(rt30Leaf0, `"Rg/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKX==="`), false},
		{"URL alphabet in a hash", rt30(rt30Leaf0, `"Rg_XH-5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXnI="`), false},
		{"URL alphabet in a proof hash", rt30(rt30Proof03, `"z4HETAx3YrRyoJ6ypL3Qs_kMeFs8yZNgs2IjlPWk9hg="`), false},
		{"entry without its padding", rt30(`In0=",`, `In0",`), false},
		{"NUL in a hash", rt30(rt30Leaf0, "\"Rg/XH+5BYxmKbtrrWIyXQNJ470uOPN82w9JuShaKXn\x00=\""), false},
		{"NUL in whitespace", rt30("\n  {\n   \"index\": 1,", "\n  {\x00\n   \"index\": 1,"), false},
		{"raw newline in an entry", rt30(`"entry": "eyJh`, "\"entry\": \"eyJh\neyJh"), false},
		{"proof hash of the previous proof at the same place", secondEntry(func(t *testing.T, r []byte) []byte {
			return replaceOnce(t, r, `"inclusion_proof": [`+"\n    \"", `"inclusion_proof": [`+"\n    "+rt30Proof00[:1]+rt30Proof00[1:45]+`", "`)
		}), false},
		{"proof hash of the previous proof at a shifted place", secondEntry(func(t *testing.T, r []byte) []byte {
			return replaceOnce(t, r, `"inclusion_proof": [`, `"inclusion_proof": [`+rt30Proof00+`, `)
		}), false},
		{"previous proof's hashes, one place down", secondEntry(func(t *testing.T, r []byte) []byte {
			return replaceOnce(t, r, `"inclusion_proof": [`, `"inclusion_proof": [`+rt30Proof00+`, `+rt30Proof01+`, `)
		}), false},
		{"entry byte the summary skips", entryText(`"size":4608`, `"size":4609`, false), false},
		{"entry byte the summary skips, rehashed", entryText(`"size":4608`, `"size":4609`, true), false},
		{"entry kind changed, rehashed", entryText(`catalog.capability.register`, `catalog.capability.registeR`, true), false},
		{"entry seq changed, rehashed", entryText(`"seq":0`, `"seq":1`, true), false},
		{"entry key duplicated, rehashed", entryText(`"seq":0`, `"seq":0,"seq":0`, true), false},
		{"entry with whitespace, rehashed", entryText(`"seq":0`, `"seq": 0`, true), false},
		{"entry seq escaped key, rehashed", entryText(`"seq":0`, `"s\u0065q":0`, true), false},
		{"index 2^64", rt30(`"index": 0,`, `"index": 18446744073709551616,`), false},
		{"index 2^64-1", rt30(`"index": 0,`, `"index": 18446744073709551615,`), false},
		{"index -1", rt30(`"index": 0,`, `"index": -1,`), false},
		{"index -0", rt30(`"index": 0,`, `"index": -0,`), false},
		{"index 0e0", rt30(`"index": 0,`, `"index": 0e0,`), false},
		{"index 0.0", rt30(`"index": 0,`, `"index": 0.0,`), false},
		{"index 00", rt30(`"index": 0,`, `"index": 00,`), false},
		{"index as a string", rt30(`"index": 0,`, `"index": "0",`), false},
		{"count 2^63", rt30(`"count": 16`, `"count": 9223372036854775808`), false},
		{"count -16", rt30(`"count": 16`, `"count": -16`), false},
		{"end_index huge", rt30(`"end_index": 16`, `"end_index": 99999999999999999999999`), false},
		{"entry null", rt30(`"entry": "eyJh`, `"entry": null, "x": "eyJh`), false},
		{"proof null", rt30(`"inclusion_proof": [`, `"inclusion_proof": null, "x": [`), false},
		{"entries null", func(t *testing.T, b []byte) []byte {
			i := bytes.Index(b, []byte(`"entries": [`))
			j := bytes.Index(b, []byte(`"anchored"`))
			return append(append(bytes.Clone(b[:i]), `"entries": null, `...), b[j:]...)
		}, false},
		{"an entry twice", func(t *testing.T, b []byte) []byte {
			i := bytes.Index(b, []byte("{\n   \"index\": 1,"))
			j := bytes.Index(b, []byte("{\n   \"index\": 2,"))
			return append(append(bytes.Clone(b[:j]), b[i:j]...), b[j:]...)
		}, false},
		{"byte order mark", func(t *testing.T, b []byte) []byte { return append([]byte("\ufeff"), b...) }, false},
		{"trailing garbage", func(t *testing.T, b []byte) []byte { return append(bytes.Clone(b), "x"...) }, false},
		{"second document", func(t *testing.T, b []byte) []byte { return append(bytes.Clone(b), "{}"...) }, false},
		{"trailing whitespace", func(t *testing.T, b []byte) []byte { return append(bytes.Clone(b), " \n\t"...) }, true},
		{"invalid UTF-8 in a key", rt30(`"leaf_hash"`, "\"leaf_hash\xff\""), false},
	}
}

// TestRedTeam30_ForgedBundles: every forgery of the list gets the strict reading's parse and
// the pre-change binary's verdict. With REDTEAM30_DUMP set, the forged bundles are written
// there (one file each) for `agora verify` of two builds to be run on them.
func TestRedTeam30_ForgedBundles(t *testing.T) {
	valid, err := os.ReadFile("testdata/bundle-pre28.json")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("testdata/audit-pre28.pub")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Key: string(key)}
	if b, err := ParseBundleBytes(valid); err != nil || !Verify(b, opts).OK {
		t.Fatalf("fixture does not verify: %v", err)
	}
	dump := os.Getenv("REDTEAM30_DUMP")
	for i, f := range redTeam30Forgeries() {
		t.Run(f.name, func(t *testing.T) {
			data := f.edit(t, bytes.Clone(valid))
			if bytes.Equal(data, valid) {
				t.Fatal("the forgery changed nothing")
			}
			if dump != "" {
				name := strings.NewReplacer(" ", "-", ",", "", "'", "", "^", "").Replace(f.name) + ".json"
				if err := os.WriteFile(filepath.Join(dump, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			matchStrict(t, i, data)
			b, err := ParseBundleBytes(data)
			if err != nil {
				if f.same {
					t.Fatalf("refused a bundle that means the valid one: %v", err)
				}
				return
			}
			rep := Verify(b, opts)
			if rep.OK != f.same {
				t.Fatalf("verify OK %v, want %v; failed rows %+v", rep.OK, f.same, rep.Failed())
			}
			if !rep.OK && len(rep.Failed()) == 0 {
				t.Fatal("a failed report with no failed row")
			}
		})
	}
}

// TestRedTeam30_TruncatedBundles: every prefix of a valid bundle (each byte boundary up to
// the first entry's proof, then every 101st) is refused with an error, never a panic, and read as
// the strict reading reads it.
func TestRedTeam30_TruncatedBundles(t *testing.T) {
	valid, err := os.ReadFile("testdata/bundle-pre28.json")
	if err != nil {
		t.Fatal(err)
	}
	valid = bytes.TrimRight(valid, " \n")
	for n := 0; n < len(valid); n++ {
		if n > 1200 && n%101 != 0 {
			continue
		}
		matchStrict(t, n, valid[:n])
		if _, err := ParseBundleBytes(valid[:n]); err == nil {
			t.Fatalf("a bundle cut at %d of %d bytes parsed", n, len(valid))
		}
	}
}

// TestRedTeam30_ConcurrentParseAndVerify: many goroutines parse the same bytes and verify the
// same parsed bundles at once (a server verifying uploads): every report is the one a lone
// run gives. Run under -race, it also catches a hash state or slab shared across goroutines.
func TestRedTeam30_ConcurrentParseAndVerify(t *testing.T) {
	valid, err := os.ReadFile("testdata/bundle-pre28.json")
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile("testdata/audit-pre28.pub")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Key: string(key)}
	tampered := bytes.Replace(valid, []byte(rt30Proof01), []byte(rt30Proof00), 1)
	shared := map[bool]*Bundle{}
	want := map[bool]bool{}
	for good, data := range map[bool][]byte{true: valid, false: tampered} {
		b, err := ParseBundleBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		shared[good] = b
		want[good] = Verify(b, opts).OK
	}
	if !want[true] || want[false] {
		t.Fatalf("fixture: valid verifies %v, tampered %v", want[true], want[false])
	}
	var wg sync.WaitGroup
	for g := range 16 {
		good := g%2 == 0
		data := map[bool][]byte{true: valid, false: tampered}[good]
		wg.Go(func() {
			for range 8 {
				b, err := ParseBundleBytes(data)
				if err != nil {
					t.Error(err)
					return
				}
				if got := Verify(b, opts).OK; got != good {
					t.Errorf("goroutine %d: verify OK %v, want %v", g, got, good)
				}
				if got := Verify(shared[good], opts).OK; got != good {
					t.Errorf("goroutine %d: shared bundle verify OK %v, want %v", g, got, good)
				}
			}
		})
	}
	wg.Wait()
}
