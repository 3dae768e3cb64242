# class: resources
# expect: blocked
# control: limits
# reason: one file past the target's file_size (RLIMIT_FSIZE) is refused however much disk is free; written sparse, past the limit, so the attempt costs nothing
# ulimit -f counts 512-byte blocks in dash and 1024-byte ones in bash, so a seek of
# (blocks / 1024 + 1) MiB is past the limit in either.
l=$(ulimit -f)
if [ "$l" = unlimited ]; then report done "no file size limit"; exit 0; fi
attempt sh -c 'trap "" XFSZ; dd if=/dev/zero of=selftest-big bs=1048576 count=1 seek=$(($1 / 1024 + 1)) 2>&1 && ls -l selftest-big; r=$?; rm -f selftest-big; exit $r' sh "$l"
