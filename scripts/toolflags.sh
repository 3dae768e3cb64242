# Sourced by the scripts that build test tools from Go modules (k8s-tools, netpol-tools,
# gvisor-tools, helm-tools, s3-tools, oidc-tools, registry-tools): the compiler flags they share.
#
# -dwarf=false: every tool links with -ldflags=-w, so the linker drops the debug information
# the compiler made for every package; not making it saves about a tenth of the compiler's CPU
# (k8s.io/api/core/v1 with its dependencies: 60.3 s to 53.5 s of CPU, cold, one run each), most
# of a cold machine's set-up being those compiles. The binaries run the same, so the flag is
# not in their stamps: a tool built before stays up to date.
# -l: no inlining in the tools' own packages and their dependencies. The inliner is most of
# what the compiler spends on the large generated packages of k8s.io: 306 of them compile in
# 50.1 s of CPU with -l against 80.4 s without (-38%; cold, one build each, the same
# packages), and -N on top saves nothing more. What the tools do at run time costs no more
# for it: a control plane started for three internal/k8stest tests spent 3.00-3.01 s of
# kube-apiserver CPU built with -l against 3.08-3.09 s without (two interleaved rounds).
# Like -dwarf=false it changes how fast a tool is built, not what it does, so it is not in
# the stamps either: a tool built before stays up to date.
# std=: the standard library compiles with no flags, as agora's own builds compile it (make
# build, scripts/images.sh), so both find it in Go's build cache once rather than twice.
# The same flags in every script: k8s-tools, netpol-tools and agent-sandbox share compiled
# k8s.io packages through Go's build cache only while their flags match.
TOOL_GCFLAGS=('-gcflags=all=-dwarf=false -l' -gcflags=std=)
