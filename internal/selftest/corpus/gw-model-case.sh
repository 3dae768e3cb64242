# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: the subagent's model spelt in another case; the model is matched exactly
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"Selftest-Model\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
