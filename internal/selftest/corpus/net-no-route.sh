# class: network
# expect: blocked
# control: sandbox
# reason: any interface but loopback is a way out that no proxy sees; the sandbox's network namespace has loopback only
ifs=$(grep ':' /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -vx lo | tr '\n' ' ')
if [ -n "$ifs" ]; then
	report done "interfaces besides loopback: $ifs"
else
	report refused "the namespace has loopback only: $(grep ':' /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
fi
