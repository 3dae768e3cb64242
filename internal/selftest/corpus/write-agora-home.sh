# class: write-outside
# expect: blocked
# control: sandbox
# reason: writing into AGORA_HOME would change the catalog or the log behind agora's back; a file the program does plant is named for the run and removed at once, so a boundary that did not hold leaves nothing in the person's home
attempt sh -c 'echo x >"$1/selftest-planted-$2" && rm -f "$1/selftest-planted-$2" && echo "planted $1/selftest-planted-$2"' sh "$home" "$nonce"
