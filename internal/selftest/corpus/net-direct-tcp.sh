# class: network
# expect: blocked
# control: sandbox
# reason: a connection that skips the proxy; the sandbox's network namespace has only its own loopback
offhost curl -sS -o /dev/null --max-time 2 --noproxy '*' http://1.1.1.1/
