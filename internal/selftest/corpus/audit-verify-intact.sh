# class: audit
# observe: verify none
# expect: allowed
# control: verifier
# reason: the exported bundle as it is passes agora verify: the twin of the tampering attacks
report done "the dispatch ran; the runner verifies the exported log as it is"
