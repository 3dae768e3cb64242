# class: network
# observe: listener
# expect: blocked
# control: sandbox
# reason: a raw TCP stream (not HTTP) to the host's loopback listener; the sandbox's loopback is its own
printf '%s\n' "$nonce" >"$out/line"
attempt curl -sS --max-time 2 --noproxy '*' -T "$out/line" "telnet://127.0.0.1:$port"
