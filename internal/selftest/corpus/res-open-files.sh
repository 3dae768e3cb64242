# class: resources
# expect: blocked
# control: limits
# reason: every descriptor can be a connection the host's gateway pays for; RLIMIT_NOFILE caps each sandbox process at 4096
command -v perl >/dev/null || { missing perl; exit 0; }
perl -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my @fh;
for my $i (1 .. 8192) {
	my $f;
	if (open $f, "<", "/dev/null") { push @fh, $f; next }
	my $e = "$!";
	@fh = (); # the report needs a descriptor of its own
	rep("refused", "open number $i failed: $e");
}
rep("done", "held 8192 open files");
' "$out"
