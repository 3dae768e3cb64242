package workerbin

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/capped"
)

// indexFile, in Dir, remembers the pins across processes: source path -> pin.
const indexFile = "index.json"

// maxIndex caps the index; a larger one is ignored (and rewritten).
const maxIndex = 1 << 20

func (p *Pinner) lookup(source string) (pin, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.mem[source]; ok {
		return e, true
	}
	e, ok := p.readIndex()[source]
	if ok && !validDigest(e.SHA256) {
		// It names the copy's file: anything else is not an entry agora wrote.
		return pin{}, false
	}
	if ok {
		p.remember(source, e)
	}
	return e, ok
}

func (p *Pinner) remember(source string, e pin) {
	if p.mem == nil {
		p.mem = map[string]pin{}
	}
	p.mem[source] = e
}

// store remembers e and rewrites the index (0600, through a rename). An index that cannot be
// written only costs the next process a read and a hash: every entry is checked against the
// files it names before it is used.
func (p *Pinner) store(source string, e pin) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remember(source, e)
	all := p.readIndex()
	all[source] = e
	b, err := json.Marshal(all)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(p.Dir, ".index-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), filepath.Join(p.Dir, indexFile)) != nil {
		os.Remove(tmp.Name())
	}
}

func (p *Pinner) readIndex() map[string]pin {
	all := map[string]pin{}
	b, err := capped.ReadFile(filepath.Join(p.Dir, indexFile), maxIndex)
	if err != nil || json.Unmarshal(b, &all) != nil {
		return map[string]pin{}
	}
	return all
}

// validDigest: 64 lowercase hex digits.
func validDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
