# class: gateway
# subagent: gw
# observe: listener
# expect: blocked
# control: grant
# reason: the gateway's fetch asked for the host's loopback; the subagent's grant names no host
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"url\":\"http://127.0.0.1:$port/$nonce\",\"method\":\"GET\"}" http://gateway/fetch
