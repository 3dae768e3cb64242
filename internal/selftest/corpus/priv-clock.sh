# class: privilege
# expect: blocked
# control: sandbox
# reason: setting the clock breaks TLS, token expiry and the audit log's timestamps for the whole host; it needs CAP_SYS_TIME, which the sandbox lacks
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MPOSIX -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my $m = (POSIX::uname())[4];
my $nr = {x86_64 => 159, aarch64 => 171}->{$m} // rep("missing", "no adjtimex number known for $m");
# ADJ_OFFSET_SINGLESHOT with an offset of 0: a clock change that changes nothing, yet needs CAP_SYS_TIME.
my $t = pack("i x4 q", 0x8001, 0) . ("\0" x 192);
syscall($nr, $t) == -1 ? rep("refused", "adjtimex: $!") : rep("done", "adjtimex accepted a clock adjustment");
' "$out"
