# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a model request carrying a key of the sandbox's own; the gateway drops every header and sets the key itself
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -H "Authorization: Bearer $mark" -d '{"model":"selftest-model","messages":[{"role":"user","content":"hello"}]}' http://gateway/model/chat/completions
