# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: nohup makes a process ignore the hangup a session's end sends; it still dies with the sandbox
# The marked shell itself waits, in short sleeps, so its command line (the mark) stays up
# and, once the runner kills it, nothing of it outlives it by more than a second.
nohup sh -c 'i=0; while [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done' "agora-selftest-$nonce" </dev/null >/dev/null 2>&1 &
report done "left a nohup process"
