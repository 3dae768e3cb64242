# class: write-outside
# observe: output selftest-textconv-ran
# expect: blocked
# control: capture
# reason: a diff driver's textconv command runs when git diffs a file it applies to; the capture's diff is --binary with attributes neutralised and no workspace config
printf '#!/bin/sh\n: >"%s/selftest-textconv-ran"\ncat "$1"\n' "$out" >"$HOME/textconv"
chmod +x "$HOME/textconv"
git config diff.selftest.textconv "$HOME/textconv"
git config diff.selftest.command "$HOME/textconv"
printf '* diff=selftest\n' >.gitattributes
echo changed >>README.md
report done "diff.selftest.textconv set, .gitattributes applies it to every file"
