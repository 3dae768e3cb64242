# class: privilege
# expect: blocked
# control: sandbox
# reason: a raw IP socket forges any packet (spoofed sources, crafted headers); it needs CAP_NET_RAW, which the sandbox lacks
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MSocket -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
socket(my $s, PF_INET, SOCK_RAW, 1) ? rep("done", "opened a raw ICMP socket") : rep("refused", "socket(AF_INET, SOCK_RAW): $!");
' "$out"
