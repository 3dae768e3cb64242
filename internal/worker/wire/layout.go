package wire

// The sandbox layout, relative to [DefaultRoot]. See the package documentation.
const (
	// DefaultRoot is where the host mounts the layout inside the sandbox.
	DefaultRoot = "/agora"
	// SecretsFD is the descriptor the secrets object arrives on, when Manifest.SecretKeys
	// is not empty.
	SecretsFD = 3

	BinDir          = "bin"
	BinFile         = "agora-worker" // in BinDir: the worker program (cmd/agora-worker)
	BundleDir       = "bundle"
	WorkspaceDir    = "workspace"
	OutDir          = "out"
	InputsDir       = "inputs"
	ManifestFile    = "manifest.json"    // in BundleDir
	SubagentFile    = "subagent.json"    // in BundleDir
	CapabilitiesDir = "capabilities"     // in BundleDir: see [CapabilityPath]
	ResultFile      = "result.json"      // in OutDir
	PatchFile       = "patch.diff"       // in OutDir
	NeedsInputFile  = "needs_input.json" // in OutDir, written by the agent
	OutputsDir      = "outputs"          // in OutDir, written by the agent
	TranscriptFile  = "transcript.jsonl" // in OutDir, written by the model runtimes
	FinalFile       = "final.md"         // in OutDir/OutputsDir, the model's last answer
	GatewayDir      = "gateway"          // read-only, model runtimes only: the host's gateway
	// CapabilityFilesDir holds each capability's files, read-only, at CapabilityFilesDir/NAME:
	// the host lays them out from the catalog; AGORA_CAPABILITIES names the directory.
	CapabilityFilesDir = "capabilities"
	GatewaySocket      = "gateway.sock" // in GatewayDir
	// ProxySocket is the host's egress proxy for the dispatch (network: proxy), in GatewayDir.
	ProxySocket = "proxy.sock"
	// TrustDir holds TrustFile, read-only: the system's roots, the roots agora.yaml adds and,
	// when the proxy terminates TLS for some host, the dispatch's proxy CA. The host also binds
	// TrustFile over SystemTrustFile, so tools that read only the system store trust it too.
	TrustDir  = "trust"
	TrustFile = "ca-certificates.crt"
)

// SystemTrustFile is the Debian-family system trust store, replaced inside the sandbox by
// TrustFile when the sandbox has the proxy.
const SystemTrustFile = "/etc/ssl/certs/ca-certificates.crt"

// ProxyTokenEnv carries, in the worker's own environment (never an argv, never a file), the
// password the host's proxy wants in Proxy-Authorization; empty when it wants none. The
// worker puts it in the proxy URLs it gives the agent and removes it from its own
// environment.
const ProxyTokenEnv = "AGORA_PROXY_TOKEN"

// The layout's mount points inside the sandbox, where the host binds the stage directory's
// parts.
const (
	BinPath       = DefaultRoot + "/" + BinDir + "/" + BinFile
	BundlePath    = DefaultRoot + "/" + BundleDir
	WorkspacePath = DefaultRoot + "/" + WorkspaceDir
	OutPath       = DefaultRoot + "/" + OutDir
	InputsPath    = DefaultRoot + "/" + InputsDir
	GatewayPath   = DefaultRoot + "/" + GatewayDir
	TrustPath     = DefaultRoot + "/" + TrustDir
	// CapabilityFilesPath is where the sandbox finds the capabilities' files.
	CapabilityFilesPath = DefaultRoot + "/" + CapabilityFilesDir
)

// CapabilitiesEnv names CapabilityFilesPath (or its place below RootEnv) for the agent.
const CapabilitiesEnv = "AGORA_CAPABILITIES"

// RootEnv names the layout root when the worker runs without a sandbox (a target with
// `sandbox: none`): the host sets it to the stage directory, which has the same layout.
const RootEnv = "AGORA_WORKER_ROOT"

// ClaimFDEnv names, in the environment of a worker started ahead in a warm slot, the
// descriptor of its claim pipe: the worker reads one byte there before it reads anything of
// its job, re-enters its working directory (the dispatch's tree was attached over the one it
// started in) and removes the variable from its environment. EOF means the slot was discarded
// before any claim: the worker exits having read nothing.
const ClaimFDEnv = "AGORA_WORKER_CLAIM_FD"

// LifelineFDEnv names, in the environment of a worker started cold by a local supervisor,
// the read end of a pipe whose only writer is that supervisor, which never writes: EOF means
// the supervisor died, and the worker exits, taking its sandbox with it (it is the sandbox's
// first process). bwrap's --die-with-parent binds the sandbox to bwrap only once it is
// released, so a supervisor killed just before would otherwise leave the agent running
// unsupervised (local/doc.go, "Killing").
const LifelineFDEnv = "AGORA_WORKER_LIFELINE_FD"

// MaxTranscript caps out/transcript.jsonl: events past it are dropped.
const MaxTranscript = 16 << 20
