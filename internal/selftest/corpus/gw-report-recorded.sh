# class: gateway
# subagent: gw
# observe: audit allowed
# expect: allowed
# control: audit
# reason: the sandbox's own report of a call is recorded, as the sandbox's: the twin of the report attacks, which shows the log is where the runner looks
need "$gwsock" "the model gateway's socket" || return 0
attempt curl -sS -f --max-time 15 --unix-socket "$gwsock" -H 'Content-Type: application/json' -d "{\"tool\":\"run_command\",\"decision\":\"allowed\",\"reason\":\"selftest\",\"args_hash\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\",\"call_id\":\"$mark\"}" http://gateway/audit/tool
