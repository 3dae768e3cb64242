# class: verdicts
# observe: verdict protected-path
# dispatch: --verify 'sh tests/run.sh'
# expect: allowed
# providers: local, docker
# control: gate
# reason: verdict-protected-test's patch with nothing protected: the gate turns green, so that row's red is the protection's doing, not a patch that fails anyway
cd "$AGORA_WORKSPACE" || exit 1
mkdir -p tests
printf 'exit 0\n' >tests/run.sh
report done "wrote tests/run.sh"
