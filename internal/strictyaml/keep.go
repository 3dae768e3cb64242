package strictyaml

import (
	"bytes"
	"compress/flate"
	"io"
)

// Keep makes p independent of the buffer it was decoded from, for a holder that outlives the
// caller's use of it (a plan keeps its positions to place the problems a later check finds).
// The lines of a JSON document are computed on first use from the document itself: p keeps
// it compressed (a 100,000-task plan's 13 MB in about 1 MB), not a copy as large as the
// source beside what was decoded from it, since the lines are seldom read at all. Positions
// recorded while decoding (YAML, or a document with an error) hold no source, and Keep does
// nothing. Call it before p is shared.
func (p *Positions) Keep() {
	if p == nil || p.src == nil {
		return
	}
	p.packed, p.src = pack(p.src), nil
}

// pack is src compressed at flate's fastest level, which still takes a plan's repeated keys
// and ids down to a tenth or less.
func pack(src []byte) []byte {
	var b bytes.Buffer
	w, err := flate.NewWriter(&b, flate.BestSpeed)
	if err != nil {
		panic(err) // only for a level out of range
	}
	w.Write(src) // a bytes.Buffer's writes do not fail
	w.Close()
	return bytes.Clone(b.Bytes())
}

// unpack is what pack compressed. Its input never left the process, so reading it fails only
// with a bug here: then no line is known, and problems are placed by path alone.
func unpack(packed []byte) []byte {
	src, err := io.ReadAll(flate.NewReader(bytes.NewReader(packed)))
	if err != nil {
		return nil
	}
	return src
}
