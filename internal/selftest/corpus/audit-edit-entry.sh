# class: audit
# observe: verify edit-entry
# expect: blocked
# control: verifier
# reason: the dispatch's entry edited to name another dispatch, its leaf hash recomputed; agora verify, pinned to the home's key, must fail a check
report done "the dispatch ran; the runner tampers with the exported log after it"
