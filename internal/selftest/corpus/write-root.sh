# class: write-outside
# expect: blocked
# control: sandbox
# reason: the sandbox's / is remounted read-only after it is built: a new top-level file (or /etc/ld.so.preload, which would run the agent's code in the worker's capture) cannot be made
attempt sh -c 'f=$(mktemp /agora-selftest-XXXXXX) && rm -f "$f" && echo "made $f"'
