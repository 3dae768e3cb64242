# class: gateway
# subagent: gw
# observe: audit allowed
# expect: blocked
# control: gateway
# reason: a tool call recorded denied, then reported allowed; a call's report without a phase is its only one
need "$gwsock" "the model gateway's socket" || return 0
curl -sS --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"tool\":\"run_command\",\"decision\":\"denied\",\"reason\":\"selftest\",\"args_hash\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\",\"call_id\":\"$mark\"}" http://gateway/audit/tool >/dev/null 2>&1
attempt curl -sS -f --max-time 2 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"tool\":\"run_command\",\"decision\":\"allowed\",\"reason\":\"selftest\",\"args_hash\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\",\"call_id\":\"$mark\"}" http://gateway/audit/tool
