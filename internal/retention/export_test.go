package retention

// SetAfterRecord sets the hook run between recording a batch and deleting its blobs.
func SetAfterRecord(f func()) { testOnlyAfterRecord = f }

// SetAfterRunRecord sets the hook run inside a run purge's transaction, after its entries are
// appended and before its rows are deleted.
func SetAfterRunRecord(f func()) { testOnlyAfterRunRecord = f }
