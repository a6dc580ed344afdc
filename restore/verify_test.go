package restore_test

import (
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
	"github.com/gflink/gflink/savepoint/vfs"
)

// logFile is a state changelog file setting key to value in state "count".
func logFile(key string, value byte) []byte {
	rec := changelog.AppendDeclare(nil, 1, 1, "count")
	rec = changelog.AppendHead(rec, changelog.OpSet, 1, 3, []byte(key))
	rec = changelog.AppendPrefixed(rec, []byte{value})
	return changelog.AppendChunk(changelog.AppendHeader(nil), rec)
}

// TestVerifySwappedLogFile: a changelog file replaced by another log file
// of the same size — every chunk of it intact — is refused by the checksum
// its checkpoint recorded; without one (a snapshot written before log
// files had checksums) only its chunks can be checked, and it passes.
func TestVerifySwappedLogFile(t *testing.T) {
	base := t.TempDir()
	logDir := filepath.Join(base, jobID, changelog.DirName)
	dir := filepath.Join(base, "chk-3")
	for _, d := range []string{logDir, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	written, other := logFile("apple", 1), logFile("grape", 9)
	if len(written) != len(other) {
		t.Fatal("the two logs must have the same size")
	}
	path := filepath.Join(logDir, "counter-0-1.log")
	if err := os.WriteFile(path, written, 0o600); err != nil {
		t.Fatal(err)
	}
	crc := savepoint.FormatCRC32C(crc32.Checksum(written, crc32.MakeTable(crc32.Castagnoli)))
	meta := func(crc string) *savepoint.Metadata {
		return &savepoint.Metadata{JobID: jobID, CheckpointID: 3, Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative,
			Operators: []savepoint.OperatorState{{UID: "counter", Parallelism: 1, MaxParallelism: 128,
				States: []savepoint.StateDescriptor{{Name: "count", Kind: "value", Entries: 1}},
				Subtasks: []savepoint.SubtaskState{{Index: 0, Bytes: int64(len(written)), Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 127,
					Changelog: &savepoint.ChangelogStateHandle{Log: []savepoint.ChangelogFile{{Path: path, Size: int64(len(written)), CRC32C: crc}}}}}}}}}
	}
	if err := restore.VerifyStateFiles(vfs.Default, dir, meta(crc)); err != nil {
		t.Fatalf("the log as written: %v", err)
	}
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	err := restore.VerifyStateFiles(vfs.Default, dir, meta(crc))
	if err == nil || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), "changelog file "+path+" is damaged") {
		t.Fatalf("a swapped log file: %v; want a refusal naming it", err)
	}
	if err := restore.VerifyStateFiles(vfs.Default, dir, meta("")); err != nil {
		t.Fatalf("without a recorded checksum, an intact log file of the same size passes: %v", err)
	}
}

// TestVerifyStateFileSize: a state file longer or shorter than the size
// its subtask records — a block appended, or one cut off and dropped from
// _metadata with it — is refused, naming the file.
func TestVerifyStateFileSize(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	m := writeSnapshot(t, dir, 1, opSpec{uid: "counter", par: 1, maxPar: 8, states: []savepoint.StateDescriptor{{Name: "count", Kind: "value", Entries: 2}},
		subs: []subSpec{{index: 0, kgs: map[int]string{1: "one", 5: "five"}}}})
	if err := restore.VerifyStateFiles(vfs.Default, dir, m); err != nil {
		t.Fatalf("as written: %v", err)
	}
	file := filepath.Join(dir, stateFileName("counter", 0))
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(orig, 1, 2, 3, 4, 5), 0o600); err != nil {
		t.Fatal(err)
	}
	err = restore.VerifyStateFiles(vfs.Default, dir, m)
	if err == nil || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), "state file "+file+" has ") {
		t.Fatalf("a state file with bytes appended: %v; want a refusal naming it", err)
	}
	// The last key group cut off, with its entry: the sizes no longer add up.
	kh := m.Operators[0].Subtasks[0].Keyed
	last := kh.KeyGroups[len(kh.KeyGroups)-1]
	kh.KeyGroups = kh.KeyGroups[:len(kh.KeyGroups)-1]
	if err := os.WriteFile(file, orig[:last.Offset], 0o600); err != nil {
		t.Fatal(err)
	}
	err = restore.VerifyStateFiles(vfs.Default, dir, m)
	if err == nil || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), file) {
		t.Fatalf("a key group cut off: %v; want a refusal naming the file", err)
	}
}
