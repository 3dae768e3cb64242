# class: write-outside
# observe: output selftest-hook-ran
# expect: blocked
# control: capture
# reason: core.hooksPath points git's hooks at the agent's own scripts (reference-transaction, post-index-change run on plain git work); the capture reads no hook of the workspace
mkdir -p "$HOME/hooks"
for h in reference-transaction post-index-change pre-commit post-commit post-checkout; do
	printf '#!/bin/sh\n: >"%s/selftest-hook-ran"\n' "$out" >"$HOME/hooks/$h"
	chmod +x "$HOME/hooks/$h"
done
git config core.hooksPath "$HOME/hooks"
echo changed >>README.md
report done "core.hooksPath set to $HOME/hooks"
