# class: resources
# needs: disk-quota
# expect: blocked
# control: limits
# reason: empty files exhaust a file system's inodes with no bytes written; the quota's tmpfs caps them at one per 16 KiB of the target's disk
# The files are removed before the report, so the capture that follows is not the test.
command -v perl >/dev/null || { missing perl; exit 0; }
mkdir -p selftest-inodes
perl -e '
my $want = $ARGV[1] * 64 + 1;
my ($st, $said) = ("done", "made $want files");
for my $i (1 .. $want) {
	next if open my $f, ">", "selftest-inodes/$i";
	($st, $said) = ("refused", "file $i of $want: $!");
	last;
}
unlink glob "selftest-inodes/*";
rmdir "selftest-inodes";
open my $f, ">", "$ARGV[0]/report" or die;
print $f "$st\t$said\n";
' "$out" "$disk"
