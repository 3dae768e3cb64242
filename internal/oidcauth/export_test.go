package oidcauth

// DisableTokenCache makes v verify every token in full (the benchmark's first-sight path).
func DisableTokenCache(v *Verifier) { v.noCache = true }

// Empty reports whether g grants nothing.
func (g Grant) Empty() bool { return g.Ceiling == "" && g.Web == "" }
