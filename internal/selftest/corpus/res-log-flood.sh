# class: resources
# observe: log 4259840
# expect: blocked
# control: limits
# reason: 64 MiB on standard output; agora keeps at most 4 MiB of a dispatch's log (MaxStdout, plus its truncation notice), so neither the home's blobs nor whoever reads the log (the runner here) takes the flood whole
head -c 67108864 /dev/zero | tr '\0' 'x'
report done "wrote 64 MiB to standard output"
