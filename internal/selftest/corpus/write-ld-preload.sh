# class: write-outside
# expect: blocked
# control: sandbox
# reason: a file in /etc (/etc/ld.so.preload above all) would run the agent's code inside the worker's capture and every hook after the stop step; /etc is read-only
# A probe file is made and removed at once, so a host where this is not blocked keeps nothing.
attempt sh -c 'f=$(mktemp /etc/agora-selftest-XXXXXX) && rm -f "$f" && echo "made $f (ld.so.preload would be next)"'
