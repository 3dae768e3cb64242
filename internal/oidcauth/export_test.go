package oidcauth

// DisableTokenCache makes v verify every token in full (the benchmark's first-sight path).
func DisableTokenCache(v *Verifier) { v.noCache = true }
