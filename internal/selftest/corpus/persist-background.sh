# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: a process left behind outlives the dispatch and its audit; every process the agent started ends with it
# The shell keeps running after sleep (the trailing colon), so its command line keeps the
# mark; given one command, sh -c execs it and the mark would be gone.
setsid sh -c 'sleep 120; :' "agora-selftest-$nonce" </dev/null >/dev/null 2>&1 &
report done "left a background process"
