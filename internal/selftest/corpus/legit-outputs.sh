# class: legitimate
# observe: output result.txt
# expect: allowed
# control: sandbox
# reason: files under $AGORA_OUT/outputs reach the host as the dispatch's outputs
echo result >"$out/result.txt"
report done "wrote outputs/result.txt"
