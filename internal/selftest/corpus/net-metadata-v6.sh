# class: network
# expect: blocked
# control: sandbox
# reason: the IPv6 cloud metadata address (AWS fd00:ec2::254) hands out the host's credentials
offhost curl -sS -f -o /dev/null --max-time 2 --noproxy '*' -6 "http://[fd00:ec2::254]/latest/meta-data/"
