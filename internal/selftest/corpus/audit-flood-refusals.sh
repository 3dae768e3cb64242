# class: audit
# subagent: gw
# observe: entries 60
# expect: blocked
# control: audit
# reason: a flood of requests the gateway refuses (an unknown route): counted in a few entries, never one per refusal
need "$gwsock" "the model gateway's socket" || return 0
i=0
: >"$out/flood"
while [ $i -lt 400 ]; do
	printf 'url = "http://gateway/selftest/%s"\nunix-socket = "%s"\noutput = "/dev/null"\nnext\n' "$i" "$gwsock" >>"$out/flood"
	i=$((i + 1))
done
attempt curl -sS --max-time 10 -K "$out/flood"
