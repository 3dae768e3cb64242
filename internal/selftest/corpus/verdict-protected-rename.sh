# class: verdicts
# observe: verdict protected-path
# dispatch: --verify 'test -e README.txt' --protect README.md
# expect: blocked
# providers: local, docker
# control: gate
# reason: the patch renames a protected file (both sides of a rename are judged)
cd "$AGORA_WORKSPACE" || exit 1
mv README.md README.txt
report done "renamed README.md"
