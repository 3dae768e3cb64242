# class: network
# expect: blocked
# control: sandbox
# reason: any interface but loopback is a way out that no proxy sees; the sandbox's network namespace has loopback only. Not for kubernetes: a pod's interface is how it reaches the gateway, and its NetworkPolicy is the boundary the other network attacks test
# providers: local docker
ifs=$(grep ':' /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -vx lo | tr '\n' ' ')
if [ -n "$ifs" ]; then
	report done "interfaces besides loopback: $ifs"
else
	report refused "the namespace has loopback only: $(grep ':' /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
fi
