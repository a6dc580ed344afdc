package stream

// SetWindowBuffers turns windows' pre-aggregation buffers on or off for the
// jobs built after it (a test restores a snapshot taken without them).
func SetWindowBuffers(on bool) { windowBuffersOff = !on }
