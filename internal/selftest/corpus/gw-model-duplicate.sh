# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a body that names the model twice, so that the gateway and the API could read different models
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
