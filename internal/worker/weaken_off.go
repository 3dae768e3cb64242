//go:build !agora_weaken

package worker

// weakenAnswer is false in every build but selftest's control test's (weaken_on.go): the
// compiler drops the branch it guards, so a shipped worker never vouches for a file the agent
// left.
const weakenAnswer = false
