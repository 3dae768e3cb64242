# class: network
# subagent: net
# observe: listener
# expect: blocked
# control: proxy
# reason: an origin-form request (no host in the request line) whose Host header names the host's loopback, sent to the proxy (or, with no proxy, to the loopback itself)
proxy=${HTTP_PROXY:-http://127.0.0.1:$port}
proxy=${proxy#http://}
proxy=${proxy%/}
printf 'GET /%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' "$nonce" "$port" >"$out/request"
attempt curl -sS --max-time 2 --noproxy '*' -T "$out/request" "telnet://$proxy"
