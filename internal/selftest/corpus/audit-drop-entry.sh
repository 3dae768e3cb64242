# class: audit
# observe: verify drop-entry
# expect: blocked
# control: verifier
# reason: the dispatch's last entry (how it ended) removed from an exported bundle; agora verify, pinned to the home's key, must fail a check
report done "the dispatch ran; the runner tampers with the exported log after it"
