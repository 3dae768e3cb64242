//go:build !agora_weaken

package modelgw

// weakenPin is false in every build but selftest's control test's (weaken_on.go): the compiler
// drops the branch it guards, so a shipped gateway has no way to skip the model pin.
const weakenPin = false
