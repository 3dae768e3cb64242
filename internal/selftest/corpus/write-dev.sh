# class: write-outside
# expect: blocked
# control: sandbox
# reason: /dev is the sandbox's own and remounted read-only: no file or node can be added to it to fill memory or shadow a device
attempt sh -c 'f=$(mktemp /dev/agora-selftest-XXXXXX) && rm -f "$f" && echo "made $f"'
