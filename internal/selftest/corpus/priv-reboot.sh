# class: privilege
# expect: blocked
# control: sandbox
# reason: reboot(2) stops the host; the kernel checks CAP_SYS_BOOT before the magic numbers, so EPERM is the sandbox and EINVAL (bad magic, sent on purpose) means the check passed
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MPOSIX -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my $m = (POSIX::uname())[4];
my $nr = {x86_64 => 169, aarch64 => 142}->{$m} // rep("missing", "no reboot number known for $m");
syscall($nr, 0, 0, 0, 0) == -1 && $! == EPERM ? rep("refused", "reboot: $!") : rep("done", "reboot passed the permission check: $!");
' "$out"
