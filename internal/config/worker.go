package config

import (
	"fmt"
	"path/filepath"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Worker names the worker program (cmd/agora-worker) agora binds into every sandbox:
//
//	worker: {binary: /opt/agora/bin/agora-worker}
//
// Only the people who run agora set it, in agora.yaml: nothing a dispatch, a plan or an MCP
// client sends can name another worker. Empty (the default) means agora-worker beside the
// agora executable, where `make install` puts it.
type Worker struct {
	// Binary is the absolute path of the worker program; "" looks beside agora.
	Binary string `yaml:"binary"`
}

// validateWorker checks the worker section: an absolute, clean path when set.
func validateWorker(pos *strictyaml.Positions, w Worker) strictyaml.Errors {
	if w.Binary != "" && (!filepath.IsAbs(w.Binary) || filepath.Clean(w.Binary) != w.Binary) {
		return strictyaml.Errors{pos.Errorf("worker.binary", "must be an absolute, clean path, got %q", w.Binary)}
	}
	return nil
}

// WorkerBinaryEnv names the worker program in agora's own environment, over agora.yaml's
// worker.binary: for the person who starts agora (and tests), never anything a run sends.
const WorkerBinaryEnv = "AGORA_WORKER_BINARY"

// WorkerBinary returns the worker program the people who run agora named: $AGORA_WORKER_BINARY,
// else worker.binary; "" when neither is set (look beside agora).
func (c *Config) WorkerBinary(getenv func(string) string) (string, error) {
	if v := getenv(WorkerBinaryEnv); v != "" {
		if !filepath.IsAbs(v) || filepath.Clean(v) != v {
			return "", fmt.Errorf("%s: must be an absolute, clean path, got %q", WorkerBinaryEnv, v)
		}
		return v, nil
	}
	return c.Worker.Binary, nil
}
