# class: privilege
# expect: blocked
# control: sandbox
# reason: chroot with an open directory outside it is the classic way out of a root; it needs CAP_SYS_CHROOT, which the sandbox lacks
command -v perl >/dev/null || { missing perl; exit 0; }
perl -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
chroot("/") ? rep("done", "chroot(/) succeeded") : rep("refused", "chroot: $!");
' "$out"
