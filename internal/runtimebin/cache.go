package runtimebin

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/capped"
)

// maxCacheFile caps the cache file; a larger one is ignored (and rewritten).
const maxCacheFile = 1 << 20

// lookup returns the cached entry for path if the file is still the one it describes.
func (r *Resolver) lookup(path string, id fileID) (cacheEntry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.mem[path]; ok && e.ID == id {
		return e, true
	}
	if r.CacheFile == "" {
		return cacheEntry{}, false
	}
	e, ok := r.readFile()[path]
	if !ok || e.ID != id || e.SHA256 == "" {
		return cacheEntry{}, false
	}
	r.remember(path, e)
	return e, true
}

func (r *Resolver) remember(path string, e cacheEntry) {
	if r.mem == nil {
		r.mem = map[string]cacheEntry{}
	}
	r.mem[path] = e
}

// store remembers e and, with a cache file, rewrites it (0600, through a rename, so a reader
// never sees half a file). A cache that cannot be written only costs the next process a hash.
func (r *Resolver) store(path string, e cacheEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remember(path, e)
	if r.CacheFile == "" {
		return
	}
	all := r.readFile()
	all[path] = e
	for p := range all { // drop entries whose file is gone
		if _, err := os.Stat(p); err != nil && p != path {
			delete(all, p)
		}
	}
	b, err := json.Marshal(all)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.CacheFile), ".runtimebin-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), r.CacheFile) != nil {
		os.Remove(tmp.Name())
	}
}

func (r *Resolver) readFile() map[string]cacheEntry {
	all := map[string]cacheEntry{}
	b, err := capped.ReadFile(r.CacheFile, maxCacheFile)
	if err != nil || json.Unmarshal(b, &all) != nil {
		return map[string]cacheEntry{}
	}
	return all
}
