// Package config is the only reader of agora.yaml, the AGORA_* environment and AGORA_HOME. It
// goes defaults -> strict parse -> validate, and hands other packages typed values.
package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// FileName is the configuration file inside AGORA_HOME.
const FileName = "agora.yaml"

// maxConfigSize caps agora.yaml; a larger file is refused rather than read.
const maxConfigSize = 1 << 20

// DefaultCapabilityMaxSize is the default cap on a capability's total file bytes.
const DefaultCapabilityMaxSize = 50 << 20

// Config is agora.yaml with defaults applied.
type Config struct {
	// Home is AGORA_HOME. Not read from the file.
	Home string `yaml:"-"`

	Catalog Catalog           `yaml:"catalog"`
	Audit   Audit             `yaml:"audit"`
	Targets map[string]Target `yaml:"targets"`
	Egress  Egress            `yaml:"egress"`
	// Runtimes names the host-installed agent CLIs (runtimes.go).
	Runtimes map[string]Runtime `yaml:"runtimes"`
	// Models prices the models budgets count in US dollars:
	// models: {NAME: {input_per_mtok: X, output_per_mtok: Y, cached_input_per_mtok: Z}}.
	Models budget.Prices `yaml:"models"`
	// Gateway is the network gateway workers on other machines (kubernetes targets) reach
	// agora through: TLS, a token per dispatch (netgw).
	Gateway Gateway `yaml:"gateway"`
	// Queues bound how many tasks run at once across the runs on each (queues.go).
	Queues map[string]Queue `yaml:"queues"`
	// Worker names the worker program bound into every sandbox (worker.go).
	Worker Worker `yaml:"worker"`
	// Blobs moves the blob store to S3-compatible object storage (blobs.go).
	Blobs Blobs `yaml:"blobs"`
	// Replicate ships agora.db and orch.db to object storage (replicate.go).
	Replicate Replicate `yaml:"replicate"`
	// Auth lets operators sign in from an OpenID Connect provider (auth.go).
	Auth Auth `yaml:"auth"`
	// Retention purges ended dispatches' products after a time (retention.go).
	Retention Retention `yaml:"retention"`
	// Leader makes orch serve a replica that serves only while it holds a Kubernetes Lease
	// (leader.go).
	Leader Leader `yaml:"leader"`
	// Resident is the background dispatcher `agora dispatch run` starts and hands its
	// dispatches to when no serve runs (resident.go).
	Resident Resident `yaml:"resident"`

	// sum is the sha256 of the bytes this configuration was parsed from (zero: no file).
	sum [32]byte
}

// FileSum is the sha256 of the agora.yaml bytes c was parsed from, zero when there was no
// file. A process that later compares agora.yaml's digest to tell an edit (serve and the
// resident dispatcher) compares it to this one, taken from the very bytes it runs with:
// the digest of a second read would be of a file edited in between.
func (c *Config) FileSum() [32]byte { return c.sum }

// Gateway configures the network gateway that `agora gateway serve` and `agora orch serve
// --gateway` run.
type Gateway struct {
	// Listen is the address the gateway listens on (HOST:PORT), e.g. 0.0.0.0:8443.
	Listen string `yaml:"listen"`
	// Advertise is the URL pods reach it at (https://HOST:PORT); its host goes into the
	// gateway's TLS certificate, and a kubernetes target without its own gateway uses it.
	Advertise string `yaml:"advertise"`
}

// Catalog holds catalog limits.
type Catalog struct {
	// CapabilityMaxSize caps a capability's total file bytes (default 50 MiB). Accepts a
	// number of bytes or a size such as "100MiB".
	CapabilityMaxSize ByteSize `yaml:"capability_max_size"`
}

// Default returns the configuration used when agora.yaml is absent.
func Default(home string) *Config {
	c := &Config{
		Home:    home,
		Catalog: Catalog{CapabilityMaxSize: DefaultCapabilityMaxSize},
	}
	c.validateTargets(nil)
	c.validateQueues(nil)
	return c
}

// HomeDir returns AGORA_HOME: the AGORA_HOME variable, else $XDG_DATA_HOME/agora, else
// ~/.local/share/agora. The path is made absolute.
func HomeDir(getenv func(string) string) (string, error) {
	if h := getenv("AGORA_HOME"); h != "" {
		return filepath.Abs(h)
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Abs(filepath.Join(x, "agora"))
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find AGORA_HOME: set AGORA_HOME or HOME: %w", err)
		}
		home = h
	}
	return filepath.Join(home, ".local", "share", "agora"), nil
}

// Load reads home/agora.yaml if it exists and returns the validated configuration.
func Load(home string) (*Config, error) {
	c := Default(home)
	path := filepath.Join(home, FileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	buf := make([]byte, maxConfigSize+1)
	n, err := readFull(f, buf)
	if err != nil && err != io.EOF {
		// A failed read must not pass for a short file: the settings after it would be lost.
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if n > maxConfigSize {
		return nil, fmt.Errorf("config %s is larger than %d bytes", path, maxConfigSize)
	}
	if err := Parse(path, buf[:n], c); err != nil {
		return nil, err
	}
	c.sum = sha256.Sum256(buf[:n])
	return c, nil
}

// Parse decodes src over c (which holds the defaults) and validates the result.
func Parse(file string, src []byte, c *Config) error {
	pos, err := strictyaml.Decode(file, src, c)
	errs, ok := strictyaml.Collect(err)
	if !ok {
		return err
	}
	errs = append(errs, c.validateTargets(pos)...)
	errs = append(errs, validateAudit(pos, &c.Audit)...)
	if c.Blobs.S3 != nil {
		errs = append(errs, validateS3(pos, "blobs.s3", c.Blobs.S3, false)...)
	}
	errs = append(errs, validateReplicate(pos, &c.Replicate)...)
	errs = append(errs, validateRuntimes(pos, c.Runtimes)...)
	errs = append(errs, validateWorker(pos, c.Worker)...)
	errs = append(errs, c.validateQueues(pos)...)
	errs = append(errs, validateAuth(pos, &c.Auth)...)
	errs = append(errs, validateRetention(pos, c.Retention)...)
	errs = append(errs, validateResident(pos, c.Resident)...)
	errs = append(errs, validateLeader(pos, c.Leader)...)
	for _, name := range c.Models.Names() {
		if err := (budget.Prices{name: c.Models[name]}).Validate(); err != nil {
			errs = append(errs, pos.Errorf("models."+name, "%v", err))
		}
	}
	if c.Catalog.CapabilityMaxSize <= 0 {
		errs = append(errs, pos.Errorf("catalog.capability_max_size", "must be positive, got %d", c.Catalog.CapabilityMaxSize))
	}
	if len(errs) > 0 {
		errs.Sort()
		return errs
	}
	return nil
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
