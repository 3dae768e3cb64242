# class: audit
# observe: verify drop-last
# expect: blocked
# control: verifier
# reason: the bundle's last entry removed; agora verify, pinned to the home's key, must fail a check
report done "the dispatch ran; the runner tampers with the exported log after it"
