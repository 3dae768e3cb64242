# class: network
# observe: listener
# expect: blocked
# control: sandbox
# reason: the host's loopback listener, the unspecified address 0.0.0.0, which Linux connects to the local host; the sandbox's network namespace has a loopback of its own
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '*' "http://0.0.0.0:$port/$nonce"
