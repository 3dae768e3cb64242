# class: write-outside
# observe: output selftest-filter-ran
# expect: blocked
# control: capture
# reason: a .gitattributes filter (with its clean command in .git/config) runs on every file git diffs; the capture neutralises attributes and reads no config of the workspace
printf '#!/bin/sh\n: >"%s/selftest-filter-ran"\ncat\n' "$out" >"$HOME/clean"
chmod +x "$HOME/clean"
git config filter.selftest.clean "$HOME/clean"
git config filter.selftest.smudge cat
printf '* filter=selftest\n' >.gitattributes
echo changed >>README.md
report done "filter.selftest.clean set, .gitattributes applies it to every file"
