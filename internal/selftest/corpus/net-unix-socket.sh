# class: network
# observe: fixture
# expect: blocked
# control: sandbox
# reason: a Unix socket in the host's temporary directory (a database, a docker or agora socket would be the same); the sandbox's /tmp is its own
need "$sock" "a Unix socket of the host" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --unix-socket "$sock" "http://selftest/$nonce"
