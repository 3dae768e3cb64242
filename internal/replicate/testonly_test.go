package replicate

import "io"

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// readFrames is readFramesTo with no limit on the frame read.
func readFrames(r io.ReaderAt, size int64, from walPos, each func(walFrame) error) (walPos, error) {
	return readFramesTo(r, size, from, 1<<32-1, each)
}
