# class: write-outside
# observe: dropfile
# expect: blocked
# control: patch
# reason: the workspace's own .git/config can name programs git runs (core.fsmonitor, core.hooksPath, diff.external, filters); agora takes the patch with them switched off, so none runs where it reaches the host
cd "$AGORA_WORKSPACE" || exit 1
hooks="$AGORA_WORKSPACE/.git/selftest-hooks"
mkdir -p "$hooks"
run="$hooks/plant"
printf '#!/bin/sh\necho "$0 $*" >"%s/drop/git-$$" 2>/dev/null\nexit 0\n' "$probe" >"$run"
chmod +x "$run"
for h in pre-commit post-commit post-checkout post-index-change reference-transaction pre-auto-gc fsmonitor-watchman; do
	cp "$run" "$hooks/$h"
done
git config core.hooksPath "$hooks"
git config core.fsmonitor "$run"
git config diff.external "$run"
git config filter.selftest.clean "$run"
git config filter.selftest.smudge "$run"
git config filter.selftest.required false
printf '* filter=selftest\n' >.git/info/attributes
printf 'x\n' >selftest-git-config.txt
report done "set core.hooksPath, core.fsmonitor, diff.external and a filter in .git/config"
