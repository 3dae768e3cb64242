# class: persistence
# observe: process
# expect: blocked
# control: sandbox
# reason: nohup makes a process ignore the hangup a session's end sends; it still dies with the sandbox
# The shell keeps running after sleep (the trailing :), so its command line keeps the mark.
nohup sh -c 'sleep 120; :' "agora-selftest-$nonce" </dev/null >/dev/null 2>&1 &
report done "left a nohup process"
