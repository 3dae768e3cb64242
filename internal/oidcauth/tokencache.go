package oidcauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCache remembers the identities of tokens already verified, by the SHA-256 of the token,
// so a client presenting the same bearer token on every request pays one signature check, not
// one per request (the budget: validation <= 50 us per request; an RS256 check alone is
// about 40 us, an ES256 one more). An entry holds only for the key set it was verified
// against: a refetched JWKS (a key rotated in or retired) empties the cache, so a token of a
// retired key is refused exactly as without it. exp and nbf are checked again on every hit.
// The token itself is never kept, only its hash.
type tokenCache struct {
	mu      sync.Mutex
	gen     uint64 // the key set's generation the entries were verified against
	entries map[[sha256.Size]byte]Identity
	notBef  map[[sha256.Size]byte]time.Time
}

// maxCachedTokens bounds the cache; past it, it starts afresh.
const maxCachedTokens = 4096

func (c *tokenCache) get(sum [sha256.Size]byte, gen uint64) (Identity, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return Identity{}, time.Time{}, false
	}
	id, ok := c.entries[sum]
	return id, c.notBef[sum], ok
}

func (c *tokenCache) put(sum [sha256.Size]byte, gen uint64, id Identity, nbf time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.entries == nil || len(c.entries) >= maxCachedTokens {
		c.gen = gen
		c.entries = map[[sha256.Size]byte]Identity{}
		c.notBef = map[[sha256.Size]byte]time.Time{}
	}
	c.entries[sum] = id
	if !nbf.IsZero() {
		c.notBef[sum] = nbf
	}
}
