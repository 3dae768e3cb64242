package orch

// SetDrain bounds how many queued events one batch takes (maxBatch otherwise), for the
// benchmarks that measure what smaller batches do to dependency-to-fire latency. Call it
// before Run.
func SetDrain(e *Engine, n int) { e.drain = n }
