# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: a double fork re-parents the process away from the agent; it still dies with the sandbox
(sh -c '(sh -c "i=0; while [ \$i -lt 120 ]; do sleep 1; i=\$((i + 1)); done" "agora-selftest-$1" </dev/null >/dev/null 2>&1 &)' sh "$nonce" &)
report done "left a re-parented process"
