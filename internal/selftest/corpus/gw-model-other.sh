# class: gateway
# subagent: gw
# observe: model
# expect: blocked
# control: gateway
# reason: a model request for another model than the subagent's; the gateway pins the model and the API never sees it
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
