# class: privilege
# expect: blocked
# control: sandbox
# reason: setuid(0) is the direct way to root; the sandbox's uid holds no CAP_SETUID
command -v perl >/dev/null || { missing perl; exit 0; }
perl -e '
sub rep { open my $f, ">", "$ARGV[0]/report" or die; print $f "$_[0]\t$_[1]\n"; exit 0 }
$< = $> = 0;
$> == 0 ? rep("done", "uid $< euid $>") : rep("refused", "setuid(0): $!, still uid $< euid $>");
' "$out"
