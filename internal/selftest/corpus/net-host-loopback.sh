# class: network
# observe: listener
# expect: blocked
# control: sandbox
# reason: a service on the host's loopback (a database, a dashboard, agora's own sockets); the sandbox's loopback is its own
attempt curl -sS -o /dev/null --max-time 2 --noproxy '*' "http://127.0.0.1:$port/$nonce"
