# class: legitimate
# observe: output reports/selftest/result.txt
# expect: allowed
# control: sandbox
# reason: outputs in subdirectories reach the host with their paths
mkdir -p "$out/reports/selftest"
echo nested >"$out/reports/selftest/result.txt"
report done "wrote outputs/reports/selftest/result.txt"
