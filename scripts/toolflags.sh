# Sourced by the scripts that build test tools from Go modules (k8s-tools, netpol-tools,
# gvisor-tools, helm-tools, s3-tools, oidc-tools, registry-tools): the compiler flags they share.
#
# -dwarf=false: every tool links with -ldflags=-w, so the linker drops the debug information
# the compiler made for every package; not making it saves about a tenth of the compiler's CPU
# (k8s.io/api/core/v1 with its dependencies: 60.3 s to 53.5 s of CPU, cold, one run each), most
# of a cold machine's set-up being those compiles. The binaries run the same, so the flag is
# not in their stamps: a tool built before stays up to date.
# std=: the standard library compiles with no flags, as agora's own builds compile it (make
# build, scripts/images.sh), so both find it in Go's build cache once rather than twice.
# The same flags in every script: k8s-tools, netpol-tools and agent-sandbox share compiled
# k8s.io packages through Go's build cache only while their flags match.
TOOL_GCFLAGS=(-gcflags=all=-dwarf=false -gcflags=std=)
