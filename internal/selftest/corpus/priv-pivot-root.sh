# class: privilege
# expect: blocked
# control: sandbox
# reason: pivot_root swaps the root file system; the kernel asks for CAP_SYS_ADMIN before anything else, so a refusal with EPERM is the sandbox, any other error means the check passed
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MPOSIX -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my $m = (POSIX::uname())[4];
my $nr = {x86_64 => 155, aarch64 => 41}->{$m} // rep("missing", "no pivot_root number known for $m");
# Two directories that are not mount points: past the permission check it fails EINVAL, harmlessly.
mkdir "$ENV{HOME}/selftest-new"; mkdir "$ENV{HOME}/selftest-new/old";
my $r = syscall($nr, "$ENV{HOME}/selftest-new", "$ENV{HOME}/selftest-new/old");
my $e = $!;
rmdir "$ENV{HOME}/selftest-new/old"; rmdir "$ENV{HOME}/selftest-new";
$r == -1 && $e == EPERM ? rep("refused", "pivot_root: $e") : rep("done", "pivot_root passed the permission check: " . ($r == -1 ? $e : "ok"));
' "$out"
