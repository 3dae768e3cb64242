# class: network
# observe: listener
# expect: blocked
# control: sandbox
# reason: the host's loopback listener, 127.0.0.1 written short (127.1); the sandbox's network namespace has a loopback of its own
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '*' "http://127.1:$port/$nonce"
