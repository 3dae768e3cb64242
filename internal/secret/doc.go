// Package secret owns the host's secret values: it seals them at rest, derives the opaque refs the
// catalog stores in their place, and scans text for credentials that must not be registered or
// recorded in the clear.
//
// # Side
//
// secret runs on the host side only. The worker and runtime MUST NOT import it: inside a sandbox,
// secret values arrive on a file descriptor, and the only piece of this tree the unprivileged side
// may use is [github.com/agora-dev/agora/internal/secret/redact].
//
// # Keys
//
// The sealing key lives in AGORA_HOME/keys/secret.key: 32 random bytes, mode 0600, created on first
// use by [LoadOrCreateKey]. A key file readable by group or other is refused, never silently fixed.
// Losing the key file makes every sealed value unreadable; that is the point.
//
// # What this package must never do
//
// Secret values are never printed, logged, stored in plaintext, or hashed into catalog identity.
// Sealed values are AES-256-GCM ciphertext bound to their ref ([Sealer.Seal]); the ref is a keyed
// MAC ([Sealer.Ref]), so without the key file nobody can test a guess against it. Errors from this
// package name paths, modes and sizes, never key bytes, plaintext or ciphertext, and a [Sealer]
// formats as an opaque placeholder under every fmt verb. [Scan] reports where a credential sits and
// a four-character preview, never the credential itself.
package secret
