# class: network
# expect: blocked
# control: sandbox
# reason: IPv6 is a second route out when only IPv4 is filtered
offhost curl -6 -sS -o /dev/null --max-time 2 --noproxy '*' 'http://[2606:4700:4700::1111]/'
