//go:build agora_weaken

package verify

// weakenInclusion passes every entry's inclusion check unchecked, in the agora that
// internal/selftest's control test builds with -tags agora_weaken and nowhere else: that
// agora's selftest must then see an entry edited with its leaf hash recomputed pass agora
// verify (audit-edit-entry). Never set in a build that ships; the tag is no flag or variable a
// person can set.
const weakenInclusion = true
