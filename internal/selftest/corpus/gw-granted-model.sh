# class: gateway
# subagent: gw
# observe: model
# expect: allowed
# control: gateway
# reason: the subagent's own model is reachable through the gateway: the twin of the gw- attacks, which shows the model sees what the gateway forwards
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 15 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"model\":\"selftest-model\",\"messages\":[{\"role\":\"user\",\"content\":\"$mark\"}]}" http://gateway/model/chat/completions
