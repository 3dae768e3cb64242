# class: privilege
# expect: blocked
# control: sandbox
# reason: the firewall (iptables, nftables) decides what every process may reach; reading or changing it needs CAP_NET_ADMIN, which the sandbox lacks
PATH="$PATH:/usr/sbin:/sbin"
if command -v iptables >/dev/null; then attempt iptables -S; else attempt nft list ruleset; fi
