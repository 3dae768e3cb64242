# class: write-outside
# expect: blocked
# control: sandbox
# reason: the system directories are bound read-only; a file the program does plant is named for the run and removed at once, so a boundary that did not hold leaves nothing in the host's /usr/bin or /etc
attempt sh -c 'for f in /usr/bin/agora-selftest-$1 /etc/agora-selftest-$1; do if echo x >"$f" 2>/dev/null; then rm -f "$f"; echo "planted $f"; exit 0; fi; done; echo x >/usr/bin/agora-selftest-$1' sh "$nonce"
