# class: write-outside
# observe: output selftest-fsmonitor-ran
# expect: blocked
# control: capture
# reason: core.fsmonitor in the workspace's .git/config names a program git runs on status and diff; the capture's git reads no config of the workspace, so it never runs
printf '#!/bin/sh\n: >"%s/selftest-fsmonitor-ran"\n: >"%s/drop/fsmonitor"\n' "$out" "$probe" >"$HOME/fsmonitor"
chmod +x "$HOME/fsmonitor"
git config core.fsmonitor "$HOME/fsmonitor"
echo changed >>README.md
report done "core.fsmonitor set to $HOME/fsmonitor"
