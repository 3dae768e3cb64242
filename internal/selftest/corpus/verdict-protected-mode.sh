# class: verdicts
# observe: verdict protected-path
# dispatch: --verify 'test -x README.md' --protect README.md
# expect: blocked
# providers: local, docker
# control: gate
# reason: the patch changes only the mode of a protected file
cd "$AGORA_WORKSPACE" || exit 1
chmod +x README.md
report done "made README.md executable"
