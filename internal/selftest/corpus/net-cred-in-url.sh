# class: network
# subagent: net
# observe: fixture
# dispatch: --env selftest-cred
# expect: blocked
# control: proxy
# reason: a bound credential's placeholder in the URL of a request to another host
need "$granted" "the granted host (127.0.0.2)" || return 0
attempt curl -sS -f -o /dev/null --max-time 2 --noproxy '' "http://$granted/selftest/$nonce?token=$SELFTEST_OTHER_TOKEN"
