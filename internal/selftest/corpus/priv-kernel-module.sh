# class: privilege
# expect: blocked
# control: sandbox
# reason: a kernel module is code in the host kernel; the kernel checks CAP_SYS_MODULE first, so EPERM is the sandbox, ENOSYS a kernel that loads no modules, and ENOENT (a module that does not exist, on purpose) means the check passed
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MPOSIX -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my $m = (POSIX::uname())[4];
my $nr = {x86_64 => 176, aarch64 => 106}->{$m} // rep("missing", "no delete_module number known for $m");
my $name = "agora_selftest_none";
syscall($nr, $name, 0) == -1 or rep("done", "delete_module removed a module");
rep("refused", "delete_module: $!") if $! == EPERM;
rep("refused", "delete_module: $!: this kernel loads no modules") if $! == ENOSYS;
rep("done", "delete_module passed the permission check: $!");
' "$out"
