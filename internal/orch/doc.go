// Package orch is the orchestrator engine: it runs plans (DAGs of tasks) to their end under
// resource locks, retries with backoff, cascades failures, and keeps every change in orch.db
// with its audit entry in the same transaction.
//
// One goroutine owns all state ([Engine.Run]). Submissions, completions, commands and backoff
// timers are events; the loop takes every event that is waiting, applies them in memory,
// commits the resulting rows and audit entries in ONE transaction, and only then fires the
// attempts it decided on. Nothing is fired before its attempt is durable, and an attempt's
// dispatch id is chosen before it is durable, so a fire repeated after a crash finds the same
// dispatch instead of starting a second one.
//
// Readiness is incremental: each task counts its unmet dependencies; a completion touches only
// its dependents, the locks it released and its run's waiting queue. Locks are global across
// runs, acquired all-or-nothing; each lock keeps a queue of waiters in the order they became
// ready, so among conflicting waiters the first ready goes first, while a task whose locks are
// free never waits behind one whose locks are not.
//
// orch runs on the host side, inside `agora orch serve`, the only process that opens orch.db.
// It never starts workers itself: an [Executor] does (package dispatchexec in production).
package orch
