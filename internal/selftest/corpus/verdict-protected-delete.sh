# class: verdicts
# observe: verdict protected-path
# dispatch: --verify "sh -c 'test ! -e README.md'" --protect README.md
# expect: blocked
# providers: local, docker
# control: gate
# reason: the patch deletes the protected file whose presence makes the gate red
cd "$AGORA_WORKSPACE" || exit 1
rm -f README.md
report done "removed README.md"
