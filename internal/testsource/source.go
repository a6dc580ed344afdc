// Package testsource has sources for tests of the runtime (apart from
// testutil, which engine/state's tests use and which must not reach the job
// API's types).
package testsource

import "github.com/gflink/gflink/internal/api"

// EmptySource is a source of ints with no splits, whose reader ends at
// once: the smallest source a job graph can have.
type EmptySource struct{}

func (EmptySource) Splits(int) ([][]byte, error) { return nil, nil }

func (EmptySource) CreateReader(api.SourceContext) (api.SourceReader[int], error) {
	return emptyReader{}, nil
}

type emptyReader struct{}

func (emptyReader) AddSplits([][]byte) error                             { return nil }
func (emptyReader) PollNext(api.Collector[int]) (api.InputStatus, error) { return api.EndOfInput, nil }
func (emptyReader) SnapshotState(int64) ([][]byte, error)                { return nil, nil }
func (emptyReader) Close() error                                         { return nil }
