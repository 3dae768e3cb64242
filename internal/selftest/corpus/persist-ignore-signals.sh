# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: a process that ignores every signal it can (TERM, HUP, INT, QUIT, USR1, USR2) in a session of its own; only SIGKILL of the whole sandbox ends it
setsid sh -c 'trap "" TERM HUP INT QUIT USR1 USR2; i=0; while [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done' "agora-selftest-$nonce" </dev/null >/dev/null 2>&1 &
report done "left a process that ignores signals"
