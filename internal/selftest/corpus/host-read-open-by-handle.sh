# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: open_by_handle_at opens a file by its inode on a bound file system (/usr's), bypassing the mount (the "shocker" escape); it needs CAP_DAC_READ_SEARCH, which the sandbox lacks
command -v perl >/dev/null || { missing perl; exit 0; }
perl -MPOSIX -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my $m = (POSIX::uname())[4];
my $nr = {x86_64 => 304, aarch64 => 265}->{$m} // rep("missing", "no open_by_handle_at number known for $m");
my $mfd = POSIX::open("/usr", O_RDONLY) // rep("refused", "open /usr: $!");
# The root directory of an ext4-like file system: inode 2, generation 0 (FILEID_INO32_GEN).
my $h = pack("LlLL", 8, 1, 2, 0);
my $fd = syscall($nr, $mfd + 0, $h, 0);
rep("refused", "open_by_handle_at: $!") if $fd < 0;
open my $s, "<", "/proc/self/fd/$fd$ARGV[1]/secret" or rep("done", "opened the file system root by handle (fd $fd); $ARGV[1] not on it: $!");
rep("done", scalar <$s>);
' "$out" "$probe"
