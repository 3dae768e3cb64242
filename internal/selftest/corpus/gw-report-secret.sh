# class: gateway
# subagent: gw
# observe: audit secret
# expect: blocked
# control: gateway
# reason: a tool report whose tool name is one of the dispatch's secrets: recorded verbatim, it would put the secret in the append-only log
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"tool\":\"$SELFTEST_SECRET\",\"decision\":\"allowed\",\"reason\":\"selftest\",\"args_hash\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\",\"call_id\":\"$mark\"}" http://gateway/audit/tool
