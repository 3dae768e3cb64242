# class: verdicts
# observe: verdict outside-changes
# dispatch: --verify 'grep -q root src/answer' --changes 'src/**'
# expect: blocked
# providers: local, docker
# control: gate
# reason: a link inside the admitted changes that points out of the tree (/etc/passwd): the gate would read what the work may not change
cd "$AGORA_WORKSPACE" || exit 1
mkdir -p src
ln -s /etc/passwd src/answer
report done "linked src/answer to /etc/passwd"
