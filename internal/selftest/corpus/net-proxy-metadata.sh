# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: proxy
# reason: the grant names the cloud metadata address; the egress proxy refuses link-local and metadata addresses whatever the grant
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' http://169.254.169.254/latest/meta-data/
