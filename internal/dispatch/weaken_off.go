//go:build !agora_weaken

package dispatch

// weakenProtect is false in every build but selftest's control test's (weaken_on.go): the
// compiler drops the branch it guards, so a shipped agora has no way to skip the check.
const weakenProtect = false
