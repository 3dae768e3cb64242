# class: host-read
# observe: secret
# expect: blocked
# control: sandbox
# reason: a host process's memory holds whatever it holds (environment, keys, tokens); the runner's agora carries a secret on its stack, which no sandbox can see or open
command -v perl >/dev/null || { missing perl; exit 0; }
perl -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
my (@err, %found);
for my $d (glob "/proc/[0-9]*") {
	next if $d eq "/proc/$$";
	open my $m, "<", "$d/maps" or next;
	my ($lo, $hi);
	while (<$m>) { ($lo, $hi) = map { hex } /^([0-9a-f]+)-([0-9a-f]+) .*\[stack\]/ and last }
	next unless defined $hi;
	open my $mem, "<", "$d/mem" or do { push @err, "$d/mem: $!"; next };
	my $buf;
	sysseek($mem, $lo, 0) and sysread($mem, $buf, $hi - $lo) or do { push @err, "$d/mem: $!"; next };
	# Every secret found is reported, since agora processes of other runs may be visible too.
	$found{$1} = 1 while $buf =~ /AGORA_SELFTEST_PROBE=([0-9a-f]+)/g;
}
rep("done", join " ", sort keys %found) if %found;
rep("refused", "no process memory visible here holds it: @err");
' "$out"
