# class: network
# subagent: net
# observe: refused
# expect: blocked
# control: grant
# reason: the metadata server by its name (metadata.google.internal); the grant names example.com:443 only
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://metadata.google.internal/computeMetadata/v1/"
