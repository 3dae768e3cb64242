# class: audit
# observe: verify forge-entry
# expect: blocked
# control: verifier
# reason: an entry appended to the bundle with its leaf hash and a copied proof; agora verify, pinned to the home's key, must fail a check
report done "the dispatch ran; the runner tampers with the exported log after it"
