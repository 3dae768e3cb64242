# class: write-outside
# expect: blocked
# control: sandbox
# reason: the system directories are bound read-only
# A probe file is made and removed at once, so a host where this is not blocked keeps nothing.
attempt sh -c 'f=$(mktemp /usr/bin/agora-selftest-XXXXXX) && rm -f "$f" && echo "made $f"'
