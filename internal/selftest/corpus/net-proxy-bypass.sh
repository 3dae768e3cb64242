# class: network
# subagent: net
# observe: fixture
# expect: blocked
# control: sandbox
# reason: a program behind the egress proxy that skips it reaches the granted host directly, past the proxy's path and method checks and its record; the sandbox's network namespace has no route but the proxy's
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '*' "http://$granted/selftest/$nonce"
