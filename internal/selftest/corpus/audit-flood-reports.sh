# class: audit
# subagent: gw
# observe: entries 600
# timeout: 20s
# expect: blocked
# control: audit
# reason: a flood of 1000 tool reports to the gateway, each an audit entry when kept; the gateway's rate limit and the dispatch's audit budget (512 entries for --timeout 20s) bound what reaches the log; the budget may end the dispatch limit-exceeded before its outputs are kept, so each report's call id carries the run's mark to show the program ran
need "$gwsock" "the model gateway's socket" || return 0
i=0
: >"$out/flood"
while [ $i -lt 1000 ]; do
	printf 'url = "http://gateway/audit/tool"\nunix-socket = "%s"\nheader = "Content-Type: application/json"\ndata = "{\\"tool\\":\\"run_command\\",\\"decision\\":\\"allowed\\",\\"reason\\":\\"flood\\",\\"args_hash\\":\\"sha256:0000000000000000000000000000000000000000000000000000000000000000\\",\\"call_id\\":\\"%s-%s\\"}"\noutput = "/dev/null"\nnext\n' "$gwsock" "$mark" "$i" >>"$out/flood"
	i=$((i + 1))
done
attempt curl -sS --max-time 15 -K "$out/flood"
