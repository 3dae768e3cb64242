//go:build agora_weaken

package worker

// weakenAnswer makes the worker keep and vouch for the outputs/final.md the agent's processes
// left, instead of the model's answer it holds, in the worker that internal/selftest's control
// test builds with -tags agora_weaken and nowhere else: that agora's selftest must then see a
// reviewer's approval forged by the code under review become agora's review
// (verdict-review-forged). Never set in a build that ships; the tag is no flag or variable a
// person can set.
const weakenAnswer = true
