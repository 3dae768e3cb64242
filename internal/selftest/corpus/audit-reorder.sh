# class: audit
# observe: verify reorder
# expect: blocked
# control: verifier
# reason: two entries of the bundle swapped; agora verify, pinned to the home's key, must fail a check
report done "the dispatch ran; the runner tampers with the exported log after it"
