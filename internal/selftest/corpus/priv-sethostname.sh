# class: privilege
# expect: blocked
# control: sandbox
# reason: renaming the host confuses every service and log that names it; the kernel checks CAP_SYS_ADMIN before the length, so EPERM is the sandbox and EINVAL (a name too long, on purpose) means the check passed
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MPOSIX -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my $m = (POSIX::uname())[4];
my $nr = {x86_64 => 170, aarch64 => 161}->{$m} // rep("missing", "no sethostname number known for $m");
my $n = "x" x 65;
syscall($nr, $n, 65) == -1 && $! == EPERM ? rep("refused", "sethostname: $!") : rep("done", "sethostname passed the permission check: $!");
' "$out"
