package config

// Audit configures the audit logs' checkpoints and anchors.
type Audit struct{}
