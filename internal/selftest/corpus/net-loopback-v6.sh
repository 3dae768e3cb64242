# class: network
# observe: fixture
# expect: blocked
# control: sandbox
# reason: a listener on the host's IPv6 loopback ([::1]); the sandbox's ::1 is its own
need "$port6" "an IPv6 loopback" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '*' "http://[::1]:$port6/$nonce"
