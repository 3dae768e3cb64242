# class: privilege
# expect: blocked
# control: sandbox
# reason: a packet socket sniffs and injects frames on an interface; it needs CAP_NET_RAW, which the sandbox lacks
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MSocket -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
# AF_PACKET is 17, ETH_P_ALL 0x0003 in network order.
socket(my $s, 17, SOCK_RAW, 0x0300) ? rep("done", "opened an AF_PACKET socket") : rep("refused", "socket(AF_PACKET, SOCK_RAW): $!");
' "$out"
