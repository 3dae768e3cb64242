//go:build agora_weaken

package modelgw

// weakenPin lets a model request name any model, in the agora that internal/selftest's control
// test builds with -tags agora_weaken and nowhere else: that agora's selftest must then see a
// request for another model reach the model (gw-model-other, gw-model-case). Never set in a
// build that ships; the tag is no flag or variable a person can set.
const weakenPin = true
