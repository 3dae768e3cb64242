# class: network
# observe: listener
# expect: blocked
# control: sandbox
# reason: the host's loopback listener, 127.0.0.1 written as one decimal number; the sandbox's network namespace has a loopback of its own
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '*' "http://2130706433:$port/$nonce"
