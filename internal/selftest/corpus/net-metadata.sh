# class: network
# expect: blocked
# control: sandbox
# reason: the cloud metadata address hands out the host's cloud credentials
offhost curl -sS -o /dev/null --max-time 2 --noproxy '*' http://169.254.169.254/latest/meta-data/
