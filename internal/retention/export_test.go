package retention

// SetAfterRecord sets the hook run between recording a batch and deleting its blobs.
func SetAfterRecord(f func()) { testOnlyAfterRecord = f }
