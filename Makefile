# The two commands a newcomer needs:
#   make demo   the main job on the embedded defaults (SQLite, local blobs, bubblewrap)
#   make test   everything CI runs
GO ?= go
export CGO_ENABLED ?= 0

.PHONY: build install demo test vet fmt-check unit warm fuzz-short mcp-inspector bench clean stress stress-all test-clock property k8s-tools s3-tools oidc-tools helm-tools helm-render registry-tools gvisor-tools netpol-tools k8s-cluster image podman test-containers test-k8s test-ui bench-targets

# build makes agora's three programs side by side: bin/agora (the small front people type:
# it hands `agora dispatch run` to a running serve and execs agora-full for everything else),
# bin/agora-full (the host program, every command) and bin/agora-worker (what runs in every sandbox and for every Claude Code hook event; agora
# looks for it beside itself and refuses to dispatch without it). -trimpath as scripts/images.sh
# builds them: the same flags share Go's build cache, so the images that tests build after
# `make build` (TestRealNodeDeployManifests) only link. GOFLAGS from the environment could
# carry -tags agora_weaken (selftest's control test's, controls off): scripts/refuse-weakened.sh
# removes such programs and fails.
# bin/agora-worker-exec is the same worker built with the agora_worker_exec tag: exec's adapter
# alone, no model runtime and no HTTP client, so it starts sooner; agora binds it for an exec
# dispatch on a local target without warm slots when it is beside agora-worker (docs/adr/0035).
build:
	$(GO) build -trimpath -o bin/ ./cmd/agora ./cmd/agora-full ./cmd/agora-worker
	$(GO) build -trimpath -tags agora_worker_exec -o bin/agora-worker-exec ./cmd/agora-worker
	./scripts/refuse-weakened.sh bin/agora bin/agora-full bin/agora-worker bin/agora-worker-exec

# install puts agora and agora-worker on PATH, side by side: $(PREFIX)/bin (PREFIX=/usr/local;
# PREFIX=$$HOME/.local for a user install). Mode 0755; agora pins the worker's bytes into
# AGORA_HOME/bin per dispatch (agora doctor checks it is there and built from the same source).
PREFIX ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/agora-worker $(DESTDIR)$(PREFIX)/bin/agora-worker
	install -m 0755 bin/agora-worker-exec $(DESTDIR)$(PREFIX)/bin/agora-worker-exec
	install -m 0755 bin/agora-full $(DESTDIR)$(PREFIX)/bin/agora-full
	install -m 0755 bin/agora $(DESTDIR)$(PREFIX)/bin/agora
	@echo "installed $(DESTDIR)$(PREFIX)/bin/agora, agora-full, agora-worker and agora-worker-exec"

# demo says what it does before each step: the first build downloads and compiles every module
# and takes minutes on a fresh machine, with nothing else on the screen.
demo:
	@echo "== make demo: building bin/agora, bin/agora-full and bin/agora-worker (go build; the first build downloads and compiles every module: minutes on a fresh machine)"
	@$(MAKE) --no-print-directory build
	@echo "== make demo: running scripts/demo.sh (a throw-away AGORA_HOME, sandboxed dispatches, a 5-task plan, the audit verified)"
	./scripts/demo.sh

# build first: both programs must build (the worker is what every sandbox runs). Each step's
# time is printed, so CI's output says where its 45 minutes went.
# The fuzz binaries build beside the steps, at the lowest priority (nice 19: the CPU the tests
# leave idle), and fuzz-short waits for them (scripts/fuzz-short.sh --build-only, FUZZBIN).
# They are kept in .cache/fuzzbin, where the next build relinks only those whose packages
# changed (and .ci/run's set-up builds them first).
# mcp-inspector (TEST_BESIDE_FUZZ) runs beside fuzz-short rather than after it: fuzz-short is
# time-boxed (each target fuzzes for its FUZZTIME whatever else runs), so the inspector's half
# a minute costs the fuzzers some executions, not the step any time; its output is printed
# after fuzz-short's, and either failing fails make test.
TEST_STEPS = fmt-check vet build unit fuzz-short
TEST_BESIDE_FUZZ = mcp-inspector
test:
	@fuzzbin="$(CURDIR)/.cache/fuzzbin"; logs=$$(mktemp -d); mkdir -p "$$fuzzbin"; rm -f "$$fuzzbin/.done"; \
	GOGC=$(TEST_GOGC) nice -n 19 ./scripts/fuzz-short.sh --build-only "$$fuzzbin" >"$$logs/build.log" 2>&1 & builder=$$!; \
	trap 'pkill -P $$builder 2>/dev/null; kill $$builder 2>/dev/null; rm -rf "$$logs"' EXIT; \
	for step in $(TEST_STEPS); do s=$$(date +%s); beside=; \
	  if [ $$step = fuzz-short ]; then \
	    (b=$$(date +%s); GOGC=$(TEST_GOGC) $(MAKE) --no-print-directory $(TEST_BESIDE_FUZZ) >"$$logs/beside.log" 2>&1; rc=$$?; \
	     echo "== make $(TEST_BESIDE_FUZZ): $$(( $$(date +%s) - b )) s (beside fuzz-short)" >>"$$logs/beside.log"; exit $$rc) & beside=$$!; fi; \
	  FUZZBIN="$$fuzzbin" GOGC=$(TEST_GOGC) $(MAKE) --no-print-directory $$step UNIT_VET=off; rc=$$?; \
	  if [ -n "$$beside" ]; then wait $$beside; brc=$$?; cat "$$logs/beside.log"; [ $$brc = 0 ] || { echo "== make $(TEST_BESIDE_FUZZ) failed"; exit 1; }; fi; \
	  [ $$rc = 0 ] || exit 1; \
	  echo "== make $$step: $$(( $$(date +%s) - s )) s"; done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# vet reads the export data of the race build the unit step compiles (CGO_ENABLED=1 and
# $(RACE), as go test's own vet pass does), not a build of its own: its dependencies and test
# packages are then compiled once. With vet's own flags, the 500 packages only vet needs
# (client-go's typed clients and the test packages among them) were compiled a second time,
# without -race: on a cold machine, after the unit step's compile and make build's, vet took
# 173 s of CPU that way against 62 s this way (docs/benchmarks-history.md). agora has no file
# that the race build tag or cgo selects, so the files vet reads are the same.
vet:
	CGO_ENABLED=1 $(GO) vet $(TRIM) $(RACE) ./...
	CGO_ENABLED=1 $(GO) vet $(TRIM) $(RACE) -tags agora_worker_exec ./cmd/agora-worker

# -race needs cgo; the binary itself stays static (CGO_ENABLED=0 in build). Packages go
# longest first (UNIT_FIRST, then the rest in ./...'s order): go test starts packages in the
# order it is given them, so the four longest (dispatch, compute/kubernetes, orch/service and
# cli: 6-9 minutes each beside the others, much of it waiting on sandboxes, clusters and real
# CLIs) start at once and every other package runs beside them, and the next longest start as
# those end, not last: internal/web (two minutes), started in ./...'s order, ran alone for the
# last 74 s of the step. internal/selftest (the whole corpus on bubblewrap, podman and the
# real kubelet: 2-4 minutes, mostly containers and pods starting) starts next. The order is by
# package time in a full `go test -json` unit run (docs/benchmarks-history.md "CI time": the jq
# command there lists them). Results print in this
# order. Five packages at a time (UNIT_P): with go test's default of two on two cores, their
# waits left a third of the CPU idle (the unit step 1,536 s with two, 1,084 s with four, same
# code), and with four, 20-39% of minutes 4-8, while the four longest all wait (1,050 s with
# four, 906 s with five, one clean clone each); a test that fails only under such load is
# found with make stress, which runs packages as many at a time beside a CPU hog. 40 minutes
# a package, for a slow machine.
UNIT_FIRST = ./internal/dispatch ./internal/compute/kubernetes ./internal/orch/service ./internal/cli \
	./internal/selftest ./internal/mcpserver ./internal/netgw ./internal/web ./internal/k8stest \
	./internal/replicate \
	./internal/orch/cron ./internal/audit/verify ./internal/runtime/claudert/claudeadapter \
	./internal/secret ./internal/orch/plan ./internal/audit ./internal/workerbin ./internal/lease \
	./cmd/agora-worker
UNIT_P = 5
# TEST_GOGC is the GOGC of make test's steps (the compiler, the linker, the test processes and
# what they start): the race-instrumented test processes collected their small heaps so often
# that signalling goroutines for the collector's stack scans was a seventh of their CPU; at 400
# the unit step takes 951 s against 1,084 (docs/BENCHMARKS.md). No test asserts on when the
# collector runs: those that measure memory force a collection first or count allocations.
TEST_GOGC = 400
# RACE is -race for agora, the standard library and every dependency but modernc.org's: the
# pure-Go SQLite is C translated to Go, and the race detector checking SQLite's own memory (as
# it never checks the C library under cgo) was most of the suite's CPU (internal/audit: 114 s
# with it, 24 s without). Races in agora's code are still caught, its database calls included
# (docs/adr/0004-race-detector-scope.md).
# The packages compile without DWARF and the test binaries link without it: nothing in a test
# reads debug information (a panic's and a race report's stacks come from the runtime's own
# tables), and not making it saves about a tenth of the compiler's CPU (internal/cli's test
# binary with every dependency, cold: 203 s of CPU with it, 183 s without), which is most of
# what a cold CI machine spends. One -gcflags names every package: for a package two patterns
# match, go applies only the last, so modernc.org's pattern repeats -dwarf=false.
RACE = -race -gcflags=all=-dwarf=false -gcflags='modernc.org/...=-race=false -dwarf=false' -ldflags=-w
# TRIM is -trimpath for every go test and go vet here, as for the builds: compiled packages are
# then cached by their content alone, not the checkout's path, so a clean clone of unchanged
# code compiles nothing again (each new clone recompiled every package, some three minutes of
# CPU of the unit step). Tests find their files from the package directory they run in.
TRIM = -trimpath
# UNIT_VET is go test's own vet pass (a subset of go vet's analyzers, over the same packages and
# test files): make test runs `make vet`, every analyzer, first, so its unit step turns the
# subset off; `make unit` alone keeps go test's default.
UNIT_VET ?=
# AGORA_TEST_BUILT: the packages whose tests drive the real programs copy them from the bin/
# that build has just made rather than each linking its own (internal/agoratest BuildBinary).
# The timeout only catches a hang: internal/dispatch, the longest package, takes 12-19 minutes
# on a quiet 2-core machine and has run past 40 beside the other four at load 20-36.
unit: build
	@echo "== make unit: every package, the longest first, $(UNIT_P) at a time (results print in that order: the first after 6-9 minutes)"
	AGORA_TEST_BUILT=$(CURDIR)/bin GOGC=$(TEST_GOGC) CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) $(if $(UNIT_VET),-vet=$(UNIT_VET)) -p $(UNIT_P) -count=1 -timeout 60m $(UNIT_FIRST) ./...

# warm compiles what make test's vet and unit steps compile, and runs nothing: the unit step's
# race-instrumented packages and test packages (go list -export: compiled, not linked, into Go's
# build cache under exactly the unit step's flags), then go vet's (the same compile), then
# make build's packages (CGO_ENABLED=0, not race-instrumented: build then only links, where it
# compiled for 77 s on a cold machine once vet no longer compiled them). .ci/run starts it at the
# lowest priority beside its tool builds, whose downloads, apt steps and single-threaded links
# leave a core idle; on a cold machine those steps then find much of it done.
warm:
	CGO_ENABLED=1 $(GO) list $(TRIM) $(RACE) -export -test -deps -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}' ./...
	CGO_ENABLED=1 $(GO) vet $(TRIM) $(RACE) ./...
	$(GO) list $(TRIM) -export -deps -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}' ./cmd/agora ./cmd/agora-full ./cmd/agora-worker
	$(GO) list $(TRIM) -tags agora_worker_exec -export -deps -f '{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}' ./cmd/agora-worker

# Every fuzz target for 1 s (FUZZTIME=30s make fuzz-short for a longer look; ADR 0033), two
# packages at a time; under make test, with the binaries built beside the earlier steps (FUZZBIN).
fuzz-short:
	FUZZTIME=$${FUZZTIME:-1s} ./scripts/fuzz-short.sh

# A third-party client (the MCP Inspector CLI, from npm) against the real binary.
mcp-inspector:
	./scripts/mcp-inspector.sh

# agora's worker image FROM scratch (the static agora-worker only) and the test toolchain image, built
# with podman without a registry; prints their digest references and saves the worker image to
# .cache/images/agora-worker.tar (docs/providers.md says how to push it).
image: build
	./scripts/images.sh

# podman's Docker-compatible API on a socket of its own (prints DOCKER_HOST=...).
podman:
	./scripts/podman.sh

# The suites of make test that need the tools (each skips, saying so, without them): the
# container provider against podman, the Kubernetes provider against a real control plane, the
# web view in Chromium. make test runs them inside `unit`; these run them alone.
test-containers:
	CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) -count=1 ./internal/compute/container ./internal/compute/fdpass
	AGORA_SELFTEST_WHOLE=1 CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) -count=1 -timeout 40m -run 'Container|Docker' ./internal/dispatch ./internal/cli ./internal/selftest

# make test runs the real-node smoke set only (internal/k8stest/smoke.go: a real node costs
# 30-120 s a test); test-k8s runs every real-node test (AGORA_K8S_REAL_NODE=1).
test-k8s: registry-tools
	AGORA_K8S_REAL_NODE=1 CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) -count=1 -timeout 60m ./internal/k8stest ./internal/compute/kubernetes ./internal/netgw ./internal/worker/remote ./internal/orch/service
	AGORA_K8S_REAL_NODE=1 CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) -count=1 -timeout 60m -run 'RealPod|RealNode' ./internal/dispatch ./internal/cli
	AGORA_SELFTEST_WHOLE=1 AGORA_K8S_REAL_NODE=1 CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) -count=1 -timeout 40m -run 'Kubernetes' ./internal/selftest

test-ui:
	CGO_ENABLED=1 $(GO) test -count=1 -run TestUI -v ./internal/web

# The Kubernetes control plane the tests run (internal/k8stest), built from Go modules.
k8s-tools:
	./scripts/k8s-tools.sh

# The S3-compatible server the object-storage tests run (versitygw, internal/agoratest/s3test, #31).
s3-tools:
	./scripts/s3-tools.sh

# The OpenID Connect provider the OIDC tests sign in against (zitadel/oidc's op, #31).
oidc-tools:
	./scripts/oidc-tools.sh

# Helm (v4, from Go modules) for the chart deploy/helm/agora's tests (#31).
helm-tools:
	./scripts/helm-tools.sh

# deploy/kubernetes/*.yaml from the chart with its default values (edit the chart, then this).
helm-render: helm-tools
	./scripts/helm-render.sh
# The OCI registry (CNCF distribution) the pull-secret and upgrade tests push agora's images to
# and the real kubelet pulls from (internal/k8stest StartRegistry, #31).
registry-tools:
	./scripts/registry-tools.sh
# gVisor's runsc and containerd-shim-runsc-v1 (#30: a kubernetes target's runtime_class on the
# real node, internal/k8stest Options.GVisor), from scripts/gvisor-tools into .cache/gvisor/bin.
gvisor-tools:
	./scripts/gvisor-tools.sh
# kubernetes-sigs/kube-network-policies (#31: the real node enforces NetworkPolicies,
# internal/k8stest Options.NetworkPolicy), from scripts/netpol-tools into .cache/netpol/bin.
netpol-tools:
	./scripts/netpol-tools.sh

# That control plane held for manual use, with an admin kubeconfig in .cache/k8s/kubeconfig.
k8s-cluster: k8s-tools
	./scripts/k8s-cluster.sh $(K8S_CLUSTER_FLAGS)

# Flakes hunted before they ship: a package's tests N times beside a busy loop on every core,
# each failed test named (scripts/stress.sh). Run it on a package that runs real processes
# before submitting a change to it; stress-all does every such package. Nothing re-runs a
# failed test to pass, here or in CI: a test that fails under load is fixed.
N ?= 5
RUN ?=
STRESS_PKGS = ./internal/dispatch ./internal/orch/service ./internal/compute/... ./internal/k8stest \
	./internal/mcpserver ./internal/replicate ./internal/egress/proxy ./internal/cli ./internal/selftest
stress:
	@test -n "$(PKG)" || { echo "make stress: name the package, e.g. make stress PKG=./internal/replicate N=5"; exit 2; }
	./scripts/stress.sh -n $(N) $(if $(RUN),-run '$(RUN)') $(PKG)
stress-all:
	./scripts/stress.sh -n $(N) $(if $(RUN),-run '$(RUN)') $(STRESS_PKGS)

# The orchestrator engine's property test at full size: 1,000 random plans of locks,
# dependencies and retries (make test runs 20; internal/orch/property_test.go). Run it after a
# change to the engine's scheduling (locks, dependencies, retries, queues): about 25 minutes
# under -race on 2 shared cores, where 100 took 144 s.
property:
	CGO_ENABLED=1 $(GO) test $(TRIM) $(RACE) -count=1 -timeout 60m -run '^TestEngine_Properties$$' ./internal/orch -rapid.checks=1000

# How much of the suite runs on the wall clock: sleeps, polling deadlines, t.Parallel, synctest.
test-clock:
	@$(GO) run scripts/testclock.go

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# The same task's wall time under bubblewrap, in a container and in a real pod.
bench-targets:
	$(GO) test ./internal/dispatch -run '^$$' -bench 'Dispatch_Targets' -benchtime 5x -benchmem

clean:
	rm -rf bin
