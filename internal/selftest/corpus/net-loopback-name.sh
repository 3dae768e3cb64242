# class: network
# observe: listener
# expect: blocked
# control: sandbox
# reason: the host's loopback listener, the host's loopback by the name localhost; the sandbox's network namespace has a loopback of its own
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '*' "http://localhost:$port/$nonce"
