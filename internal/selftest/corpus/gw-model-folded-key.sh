# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a second model key that differs only in case (Model), which a case-insensitive reader takes
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"Model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
