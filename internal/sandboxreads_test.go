package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// hostReaders are the host-side packages that handle a dispatch's stage directory, which the
// sandbox shares with the agent. They read files only through internal/sandboxfs (no symlink
// on the path, regular files, capped, hash-checked); any other file read here is a way back to
// a host-file read through a swapped symlink and must be listed in readAllowed with its reason.
var hostReaders = []string{"dispatch", "dispatch/detach", "orch/dispatchexec", "cli", "cli/cmdutil", "cli/dispatchcmd", "cli/outdir", "cli/verify", "cli/audit", "cli/selftest", "cli/gate", "cli/branch", "cli/gateway", "cli/httpauth", "cli/mcp", "cli/gc", "retention/homesweep", "cli/restore", "replicate/homerestore", "cli/doctorcmd", "cli/runread", "cli/capability", "cli/orch", "compute/container/slots"}

// fileReads are the calls that open or read a file by path.
var fileReads = map[string]bool{
	"os.Open": true, "os.OpenFile": true, "os.ReadFile": true, "os.ReadDir": true, "os.OpenRoot": true,
	"os.DirFS": true, "filepath.WalkDir": true, "filepath.Walk": true,
	"capped.NoFollow": true, "capped.ReadFile": true,
	"os.Readlink": true, "os.Lstat": true, "os.Stat": true,
	"unix.Open": true, "unix.Openat": true, "unix.Openat2": true,
}

// readAllowed lists every other file read in hostReaders: "file:function: call" and why it
// never touches a path the sandbox can write.
var readAllowed = map[string]string{
	"dispatch/stage.go:lstatOK: os.Lstat":                            "asks whether AGORA_HOME/dispatches/ID, a stage directory the host makes (0700; sandboxes bind only directories beneath it), exists; lstat follows no link and reads no byte",
	"dispatch/stack.go:sweepStackScratch: os.ReadDir":                "AGORA_HOME/dispatches/.stack, where accept builds stacked bases on the host before any stage or sandbox exists; no sandbox binds it, and only the names and times of its entries are read, to remove old ones",
	"dispatch/warmk8s.go:k8sHomes: os.ReadFile":                      "AGORA_HOME/keys/audit.pub, the home's public audit key made by agora init (0600); no sandbox binds AGORA_HOME/keys, and its bytes only go into the hash of the slots' home label (red team 33)",
	"dispatch/warmdocker.go:sweepDocker: os.Stat":                    "asks whether AGORA_HOME/gateway, the host's own directory, exists (no holder ever ran otherwise); reads no byte",
	"cli/dispatchcmd/handoff.go:ownPrivate: os.Lstat":                "AGORA_HOME/orch and orch.sock, the host's own directory (no sandbox binds it): their type, mode and owner decide whether the CLI trusts serve",
	"cli/dispatchcmd/resident_start.go:openResidentLog: os.OpenFile": "creates or appends AGORA_HOME/orch/resident.log in this user's 0700 orch/ (no sandbox binds it), write-only, O_NOFOLLOW|O_NONBLOCK, regular files only",
	"cli/dispatchcmd/runner.go:newHandoffRunner: os.Stat":            "/proc/self/exe, serve's own executable",
	"cli/orch/gatewarn.go:enclosingRepo: os.Lstat":                   "the person's current directory and its parents, looking for .git (orch validate; no sandbox is involved)",
	"cli/dispatchcmd/runner.go:fileSum: os.ReadFile":                 "AGORA_HOME/agora.yaml, the operator's config (no sandbox binds it), hashed to tell an edit since serve started",
	"cli/selftest/selftest.go:selftestRun: os.ReadFile":              "AGORA_HOME/agora.yaml, the operator's config (no sandbox binds it), whose target node selftest copies into its throw-away home",
	"cli/dispatchcmd/runner.go:isRunning: os.Stat":                   "serve's own executable path, to tell a replacement since it started",
	"cli/dispatchcmd/runner.go:peerNotAgora: os.Readlink":            "/proc/PID/exe of the peer of orch.sock (or of resident.sock, for --stop): the kernel's link",
	"cli/dispatchcmd/runner.go:peerNotAgora: os.ReadFile":            "/proc/PID/cmdline of the same peer: the kernel's file, at most ARG_MAX",
	"dispatch/process.go:processStat: os.ReadFile":                   "/proc/PID/stat: the kernel's file",
	"dispatch/logsink.go:createLog: os.OpenFile":                     "creates the supervisor's own log, write-only, O_EXCL|O_NOFOLLOW: it reads nothing and opens nothing already there",
	"dispatch/logsink.go:appendLogSink: os.OpenFile":                 "reopens the supervisor's own log (in the stage directory, which only the host writes: an adoptable dispatch never has sandbox: none) write-only, O_APPEND|O_NOFOLLOW, for an adopted dispatch; its size is read from the descriptor",
	"dispatch/adopt.go:orphanedFor: os.Lstat":                        "the host's own orphan mark in the stage directory (only the host writes there: an adoptable dispatch never has sandbox: none), for its mtime; reads no byte",
	"dispatch/adopt.go:Orphaned: os.Lstat":                           "the same host mark (the stage directory of a record's id, which is a ULID), for its mtime; reads no byte",
	"dispatch/adopt.go:adoptedSince: os.OpenFile":                    "the host's own .adoptions mark in the stage directory (written by markAdoptions; an adopted dispatch with a stored gateway session runs in a pod, so no sandbox binds this host's stage), opened O_NOFOLLOW and read at most 32 bytes",
	"dispatch/adopt.go:orphanedFor: os.OpenFile":                     "creates (O_EXCL) the same host mark, empty; reads no byte",
	"dispatch/verifycache.go:verifyCacheBind: os.Lstat":              "the target's verify_cache, a directory the operator named outside AGORA_HOME (refused when it is the home, inside it or above it) that no sandbox can write (a verify sandbox binds it read-only); asks its type, reads no byte",
	"dispatch/verifycache.go:sameDirOnPath: os.Stat":                 "agora's home, the verify_cache and the directories above each, for their device and inode only (a cache that is the home under another path is refused); reads no byte",
	"dispatch/capfiles.go:emptyDir: os.Lstat":                        "a warm slot's staged capabilities directory (#30), made by the host at fill in the slot's 0700 root directory and bound read-only into the slot's sandbox, where only agora's blocked worker (no agent yet) runs as its uid; asks its type, reads no byte",
	"dispatch/capfiles.go:emptyDir: os.OpenFile":                     "the same staged directory, opened O_NOFOLLOW|O_DIRECTORY to see that it holds no name; reads no file",
	"dispatch/stage.go:chmodAsMkdir: os.Lstat":                       "a probe directory the host has just made in the dispatch's stage directory (host-only, no sandbox binds it) to learn the mode mkdir gives under the umask; reads no byte",
	"dispatch/adopt.go:prepareAdopted: os.Lstat":                     "asks whether the stage's bundle and out directories (entries of host-only directories: the stage, or the disk quota's root, 0700 root) are still there; reads no byte",
	"dispatch/warm.go:SweepWarm: os.ReadDir":                         "lists AGORA_HOME/dispatches/.warm, the host's directory of per-target slot directories it made itself; no sandbox binds it or anything above a slot (each entry is then reaped by local.ReapSlots)",
	"dispatch/warmtemplate.go:readTemplateBytes: os.OpenFile":        "AGORA_HOME/dispatches/.warm/TARGET/template.json, written by a root supervisor of the host (0600 in a 0700 directory); no sandbox binds .warm or anything above a slot directory",
	"dispatch/detach/standby.go:start: os.OpenFile":                  "/dev/null for the standby supervisor",
	"dispatch/detach/status.go:Publish: os.OpenFile":                 "serve's own status file in AGORA_HOME/dispatches/.warm (0600), which no sandbox binds",
	"dispatch/detach/status.go:ReadHolders: os.Stat":                 "AGORA_HOME/dispatches/.warm itself, the host's directory; no sandbox binds it",
	"dispatch/detach/status.go:readHolder: os.OpenFile":              "a serve's status file in AGORA_HOME/dispatches/.warm (0600), which no sandbox binds",
	"cli/dispatchcmd/standby.go:standbyStale: os.Stat":               "/proc/self/exe, the standby's own binary, to tell a replaced agora binary at its claim",
	"dispatch/live.go:writeOwnPhase: os.OpenFile":                    "creates the stage's phase file write-only, O_EXCL|O_NOFOLLOW: it reads nothing and opens nothing already there",
	"dispatch/stage.go:hold: os.OpenFile":                            "creates dispatches/.held/<id>, the host's index of stages to release, never bound into a sandbox",
	"dispatch/stage.go:makeFiles: os.OpenFile":                       "creates the stage's phase file and logs write-only (O_EXCL, O_NOFOLLOW, O_NONBLOCK): it reads nothing, and a name there already is left alone",
	"dispatch/stage.go:checkRunnable: os.Stat":                       "the agora binary the host runs",
	"dispatch/bundles.go:writeBundleFiles: os.OpenFile":              "creates (O_EXCL) a file of a shared bundle being staged in the stage directory, before any sandbox exists",
	"dispatch/bundles.go:checkOwnDir: os.Lstat":                      "dispatches/.bundles and its entries, which a sandbox sees only as read-only mounts; their files are then read through sandboxfs",
	"dispatch/accept.go:resolveRevision: os.Stat":                    "the --repo a person names",
	"dispatch/gateway.go:removeGatewayEntry: os.Lstat":               "the stage's gateway link, the supervisor's own, never bound into a sandbox; its target must be a /tmp/agora-gw-* directory",
	"dispatch/gateway.go:removeGatewayEntry: os.Readlink":            "the same link",
	"cli/completion.go:existingHome: os.Stat":                        "AGORA_HOME's agora.db, to complete without creating a home; never a stage",
	"cli/audit/audit.go:auditExportRun: os.Lstat":                    "the --out path a person names",
	"cli/cmdutil/refs.go:SplitRepo: os.Stat":                         "the --repo path a person names",
	"cli/httpauth/httpauth.go:readTokensFile: os.Stat":               "the tokens file a person names",
	"cli/orch/web_oidc.go:webOIDCSecret: os.OpenFile":                "the web view's client secret file agora.yaml names (auth.oidc.web.client_secret_file), opened once, O_NONBLOCK, regular files only",
	"cli/orch/client.go:orchValidateRun: os.Stat":                    "the plan path a person names",
	"cli/outdir/outdir.go:openSubdir: unix.Openat":                   "below a directory a person names, one component at a time, never through a link",
	"cli/outdir/outdir.go:createAt: unix.Openat":                     "creates a file there with O_EXCL|O_NOFOLLOW",
	"cli/outdir/outdir.go:sameFile: unix.Openat":                     "reads back a file there with O_NOFOLLOW",
	"cli/outdir/outdir.go:WriteFile: os.Lstat":                       "the --out path a person names, checked for a link",
	"dispatch/capfiles.go:stageCapabilityFiles: os.OpenRoot":         "the capability's directory it has just made in the stage, to write the catalog's files into, before any sandbox exists",
	"dispatch/capfiles.go:setDirModes: unix.Openat":                  "the capability layout's directories, opened only to list and chmod them, one component at a time with O_NOFOLLOW|O_DIRECTORY: no link is followed and no file's content is read",
	"dispatch/stage.go:heldStages: os.ReadDir":                       "lists dispatches/.held/, the host's own index",
	"dispatch/uidlease.go:claimUID: os.Lstat":                        "only whether state/.held/<id> exists (the stage a dead supervisor left); the held directory is agora's own, never bound into a sandbox",
	"dispatch/uidlease.go:leasedUIDIdle: os.ReadDir":                 "dispatches/.uids, the lease files agora makes (0600) to find which uid a dead supervisor's dispatch leased; never bound into a sandbox",
	"dispatch/uidlease.go:leasedUIDIdle: os.ReadFile":                "dispatches/.uids/<uid>, a lease file agora wrote (the dispatch id it names); never bound into a sandbox",
	"dispatch/uidlease.go:leaseUID: os.OpenFile":                     "creates or opens dispatches/.uids/<uid> (O_NOFOLLOW) only to flock it, reading nothing; the supervisor's own, never bound into a sandbox",
	"dispatch/stage.go:scrubGitDir: filepath.WalkDir":                "the workspace's .git that the host's own git fetch just wrote, at staging, before any sandbox exists",
	"dispatch/stage.go:scrubGitDir: os.ReadFile":                     "a regular file of that .git (links skipped), read at staging before any sandbox exists",
	"dispatch/stage.go:handOver: filepath.WalkDir":                   "chowns the stage to the sandbox uid before the sandbox exists (Lchown: no link followed)",
	"cli/dispatchcmd/read.go:followLog: os.Open":                     "the supervisor's live log in the stage directory, which is never bound into the sandbox",
	"dispatch/detach/spawn.go:spawn: os.OpenFile":                    "/dev/null for the detached supervisor",
	"dispatch/detach/log.go:supervisorStderr: os.OpenFile":           "/dev/null for a detached supervisor whose log cannot be opened",
	"dispatch/detach/log.go:openSupervisorLog: os.Lstat":             "AGORA_HOME/dispatches/supervisors.log, the host's own log of its detached supervisors (0600), for its size before it is rotated; no sandbox binds the dispatches directory itself, only paths inside a stage",
	"dispatch/detach/log.go:openSupervisorLog: os.OpenFile":          "the same log, opened write-only, O_APPEND|O_NOFOLLOW, as a supervisor's stderr; no byte is read",
	"dispatch/trust.go:readSystemTrust: os.Open":                     "the host's system trust store (/etc/ssl/certs/ca-certificates.crt), copied into the sandbox's",
	"cli/orch/client.go:readPlan: capped.ReadFile":                   "a plan file a person names",
	"cli/cmdutil/readfile.go:ReadLimited: capped.ReadFile":           "a file a person names",
	"cli/verify/verify.go:readBundle: os.Open":                       "the bundle a person names",
	"cli/verify/verify.go:openBundle: os.Open":                       "the bundle a person names, opened to be streamed when it is large; the verifier reads it by offset and trusts none of its bytes",
	"cli/anchors.go:checkpointerFor: os.ReadFile":                    "keys/audit.pub in AGORA_HOME",
	// Replication and restore: AGORA_HOME's own files and the directories the operator names.
	"cli/replicate.go:startReplication: os.ReadFile":                 "keys/audit.pub (the home's identity in the bucket) and keys/secret.key (the segments' key) in AGORA_HOME",
	"retention/homesweep/replica.go:PruneReplicas: os.ReadFile":      "keys/audit.pub (the home's identity in the bucket) and keys/secret.key (the segments' key) in AGORA_HOME",
	"cli/doctorcmd/buckets.go:replicaOwned: os.ReadFile":             "keys/audit.pub and keys/secret.key in AGORA_HOME, which tell this home's replica generations from another home's",
	"cli/replicate.go:run: os.OpenFile":                              "AGORA_HOME/DB-replicate.lock (or orch/orch.db-replicate.lock), a lock file the host makes and only flocks",
	"cli/replicate_anchor.go:replicating: os.Open":                   "the same lock file, opened only to probe whether a serve holds it (flock, never read)",
	"replicate/homerestore/homerestore.go:checkAnchors: os.ReadFile": "keys/audit.pub of the home restore just made (--to, a new directory)",
	"replicate/homerestore/homerestore.go:Run: capped.ReadFile":      "the agora.yaml (--config) and the files of keys/ (--keys) a person names for a restore, or a standby serve's own home's at a takeover",
	"replicate/homerestore/homerestore.go:emptyDir: os.Open":         "the --to directory a person names, only listed to refuse a non-empty one",
	"cli/outdir/outdir.go:Open: os.OpenFile":                         "opens the --to directory a person names, to write into",
	"cli/outdir/outdir.go:WriteFile: os.OpenFile":                    "creates the --out file a person names (O_EXCL|O_NOFOLLOW)",

	// Docker warm slots (compute/container/slots): the holder's gateway directory, and the
	// claiming dispatch's read-only bind sources copied into a slot's places.
	"compute/container/slots/claimed.go:holdClaim: os.OpenFile":      "AGORA_HOME/gateway/claimed/SLOT, a lock file the host makes (0600, O_NOFOLLOW) and only flocks; no container binds gateway/claimed (a slot sees only the gateway's socket)",
	"compute/container/slots/claimed.go:claimHeld: os.OpenFile":      "the same host lock file, opened O_NOFOLLOW to ask flock whether a living holder has it; no byte is read",
	"compute/container/slots/claimed.go:sweepClaimMarks: os.ReadDir": "lists AGORA_HOME/gateway/claimed, the host's own directory of lock files; names are checked as slot ids before use",
	"compute/container/slots/claimed.go:listenSlotSocket: unix.Open": "an O_PATH descriptor of AGORA_HOME/gateway, the host's own directory, to name a socket in it; nothing is read through it and no container binds the directory",
	"compute/container/slots/claimed.go:sweepSlotSockets: os.Lstat":  "asks whether a name in AGORA_HOME/gateway (the host's own directory) is a socket before dialling it; reads no byte",
	"compute/container/slots/gateway.go:loadSlotCA: os.OpenFile":     "creates and flocks AGORA_HOME/gateway/slot-keys.lock, the host's own lock file (0600, O_NOFOLLOW); no byte is read and no container binds gateway/",
	"compute/container/slots/files.go:placeIsFile: os.Stat":          "the template's bind source (a host-made bundle, capability files, inputs or runtime binary: read-only in every sandbox), for its type only",
	"compute/container/slots/files.go:makePlace: os.OpenFile":        "creates (O_EXCL, O_NOFOLLOW) an empty place in AGORA_HOME/gateway/slotfiles/SLOT, the host's own directory, before the slot container exists",
	"compute/container/slots/files.go:fillPlace: os.Lstat":           "the claiming dispatch's read-only bind source (host-made bundle, capability files, inputs, runtime binary: no sandbox can write them), for its type",
	"compute/container/slots/files.go:fillPlace: filepath.WalkDir":   "walks the same read-only bind source without following symlinks: each entry is linked or copied as what it is (a symlink as a symlink), never followed, into the slot's read-only place",
	"compute/container/slots/files.go:fillPlace: os.Readlink":        "a symlink in the same read-only bind source, copied as a symlink (never followed), as a cold read-only bind shows it",
	"compute/container/slots/files.go:copyInto: os.OpenFile":         "a regular file of the same read-only bind source, opened O_NOFOLLOW to copy it into the slot's place; and the place itself, the host's own file",
	"compute/container/slots/files.go:sweepSlotFiles: os.ReadDir":    "lists AGORA_HOME/gateway/slotfiles, the host's own directory of slot places; names are checked as slot ids before use",
	"compute/container/slots/gateway.go:live: os.Lstat":              "asks whether AGORA_HOME's own slot directory of the docker gateway still exists; reads no byte, and a slot container reaches it only over the gateway socket",
	"compute/container/slots/warmer.go:Reap: os.Stat":                "asks whether AGORA_HOME/gateway, the host's own directory, exists (no holder ever ran otherwise); reads no byte",

	"cli/orch/schedule_testonly.go:testOnlySchedulerHooks: os.ReadFile": "the scheduler's test-only clock file AGORA_TESTONLY_SCHEDULE_CLOCK names (set only by the schedule crash tests), never a stage",
}

func TestSandboxPathsReadOnlyThroughSandboxfs(t *testing.T) {
	seen := map[string]bool{}
	for _, pkg := range hostReaders {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				// A function's body, or a package-level declaration (a var's initializer
				// may hold a func literal), named "<decl>".
				var body ast.Node = decl
				name := "<decl>"
				if fn, ok := decl.(*ast.FuncDecl); ok {
					if fn.Body == nil {
						continue
					}
					body, name = fn.Body, fn.Name.Name
				}
				ast.Inspect(body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					x, ok := sel.X.(*ast.Ident)
					if !ok || !fileReads[x.Name+"."+sel.Sel.Name] {
						return true
					}
					key := filepath.ToSlash(path) + ":" + name + ": " + x.Name + "." + sel.Sel.Name
					seen[key] = true
					if _, ok := readAllowed[key]; !ok {
						t.Errorf("%s: %s.%s in %s reads a file outside internal/sandboxfs; read the stage directory through sandboxfs, or add it to readAllowed with why it never touches a sandbox-writable path",
							fset.Position(call.Pos()), x.Name, sel.Sel.Name, name)
					}
					return true
				})
			}
		}
	}
	for key := range readAllowed {
		if !seen[key] {
			t.Errorf("readAllowed lists %q, which no longer exists: remove it", key)
		}
	}
}
