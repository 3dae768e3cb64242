# class: write-outside
# observe: output selftest-leak
# expect: blocked
# control: capture
# reason: an output that is a symlink to a host file would make the host copy that file into the dispatch's products; the host reads outputs without following links and skips links
ln -s "$probe/secret" "$out/selftest-leak"
report done "left outputs/selftest-leak -> $probe/secret"
