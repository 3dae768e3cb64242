//go:build agora_weaken

package dispatch

// weakenProtect turns off a verify gate's protected paths, in the agora that
// internal/selftest's control test builds with -tags agora_weaken and nowhere else: that
// agora's selftest must then see the verdict attacks the protection stops (a patch that
// rewrites the gate's own script or the tests that judge it) turn the gate green. Never set
// in a build that ships; the tag is no flag or variable a person can set.
const weakenProtect = true
