package restore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
)

// validMetadata is what gflink writes for a job of three operators: a
// source with operator state in a state file, a canonical keyed counter
// at parallelism 2 (subtask 1 inlined), a changelog operator over rocksdb
// (a native materialization and a log), and a native rocksdb operator.
func validMetadata() *savepoint.Metadata {
	inline := make([]byte, 40)
	return &savepoint.Metadata{Version: 1, JobID: "j", CheckpointID: 7, Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative,
		Operators: []savepoint.OperatorState{
			{UID: "source", Parallelism: 1, MaxParallelism: 128,
				States: []savepoint.StateDescriptor{{Name: "SourceReaderState", Kind: "operator-list", Entries: 1}},
				Subtasks: []savepoint.SubtaskState{{Index: 0, Bytes: 30,
					Operator: &savepoint.StreamStateHandle{Path: "src-0", Offset: 12, Length: 18}}}},
			{UID: "counter", Parallelism: 2, MaxParallelism: 8,
				States: []savepoint.StateDescriptor{{Name: "count", Kind: "value", Entries: 5}},
				Subtasks: []savepoint.SubtaskState{
					{Index: 0, Bytes: 100, Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 3,
						KeyGroups: []savepoint.KeyGroupOffset{{KeyGroup: 1, Offset: 12, Length: 40}, {KeyGroup: 3, Offset: 52, Length: 48}},
						Stream:    &savepoint.StreamStateHandle{Path: "counter-0"}}},
					{Index: 1, Bytes: 40, Keyed: &savepoint.KeyedStateHandle{Start: 4, End: 7,
						KeyGroups: []savepoint.KeyGroupOffset{{KeyGroup: 5, Offset: 12, Length: 28}},
						Stream:    &savepoint.StreamStateHandle{Inline: inline}}},
				}},
			{UID: "logged", Parallelism: 1, MaxParallelism: 128,
				States: []savepoint.StateDescriptor{{Name: "seen", Kind: "map", Entries: 9}},
				Subtasks: []savepoint.SubtaskState{{Index: 0, Bytes: 300 + 40 + 60, Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 127,
					Native: &savepoint.NativeStateHandle{BackendID: "b1", Files: []savepoint.NativeFile{
						{Name: "000004.sst", Path: "../shared/b1-000004.sst", Size: 250, CRC32C: "0badf00d"},
						{Name: "MANIFEST-000001", Path: "../shared/b1-m1-MANIFEST-000001", Size: 50, CRC32C: "00000001"}}},
					Changelog: &savepoint.ChangelogStateHandle{MaterializationID: 1, MaterializedSize: 300, Log: []savepoint.ChangelogFile{
						{Path: "/dstl/j/dstl/logged-0-1.log", Size: 40, CRC32C: "12345678"},
						{Path: "/dstl/j/dstl/logged-0-2.log", Size: 60}}}}}}},
			{UID: "lsm", Parallelism: 1, MaxParallelism: 128,
				States: []savepoint.StateDescriptor{{Name: "total", Kind: "value", Entries: 2}},
				Subtasks: []savepoint.SubtaskState{{Index: 0, Bytes: 70, Keyed: &savepoint.KeyedStateHandle{Start: 0, End: 127,
					Native: &savepoint.NativeStateHandle{BackendID: "b2", Files: []savepoint.NativeFile{
						{Name: "000007.sst", Path: "b2-000007.sst", Size: 60},
						{Name: "OPTIONS-000003", Path: "b2-OPTIONS-000003", Size: 10}}}}}}},
		}}
}

func TestValidate(t *testing.T) {
	if err := restore.Validate(validMetadata()); err != nil {
		t.Fatalf("what gflink writes: %v", err)
	}
	op := func(m *savepoint.Metadata, uid string) *savepoint.OperatorState { return m.Operator(uid) }
	for _, tc := range []struct {
		name string
		edit func(m *savepoint.Metadata)
		want string // "" : still valid
	}{
		{"operators null", func(m *savepoint.Metadata) { m.Operators = nil }, `"operators" is empty or null`},
		{"operators empty", func(m *savepoint.Metadata) { m.Operators = []savepoint.OperatorState{} }, `"operators" is empty or null`},
		{"negative checkpoint id", func(m *savepoint.Metadata) { m.CheckpointID = -1 }, `"checkpointId" is -1`},
		{"no uid", func(m *savepoint.Metadata) { m.Operators[0].UID = "" }, "operators[0] has no uid"},
		{"uid twice", func(m *savepoint.Metadata) { m.Operators[1].UID = "source" }, "operator source is listed twice"},
		{"negative parallelism", func(m *savepoint.Metadata) { op(m, "counter").Parallelism = -1 }, `operator counter: "parallelism" is -1; it must be in [1, 8]`},
		{"zero parallelism", func(m *savepoint.Metadata) { op(m, "source").Parallelism = 0 }, `operator source: "parallelism" is 0`},
		{"parallelism above max", func(m *savepoint.Metadata) { op(m, "counter").Parallelism = 9 }, `operator counter: "parallelism" is 9`},
		{"zero max parallelism", func(m *savepoint.Metadata) { op(m, "source").MaxParallelism = 0 }, `operator source: "maxParallelism" is 0; it must be in [1, 32768]`},
		{"max parallelism too high", func(m *savepoint.Metadata) { op(m, "lsm").MaxParallelism = 32769 }, `operator lsm: "maxParallelism" is 32769`},
		{"state without name", func(m *savepoint.Metadata) { op(m, "counter").States[0].Name = "" }, "operator counter: a state has no name"},
		{"state twice", func(m *savepoint.Metadata) {
			o := op(m, "counter")
			o.States = append(o.States, o.States[0])
		}, `operator counter: state "count" is listed twice`},
		{"negative entries", func(m *savepoint.Metadata) { op(m, "counter").States[0].Entries = -3 }, `operator counter: state "count" has -3 entries`},
		{"state but no subtasks", func(m *savepoint.Metadata) { op(m, "counter").Subtasks = []savepoint.SubtaskState{} },
			`operator counter: it has states (count) but "subtasks" is empty`},
		{"keyed entries but no keyed state", func(m *savepoint.Metadata) {
			o := op(m, "lsm")
			o.Subtasks[0].Keyed, o.Subtasks[0].Bytes = nil, 0
		}, "operator lsm: its keyed states hold 2 entries, but no subtask has keyed state"},
		{"operator entries but no operator state", func(m *savepoint.Metadata) {
			o := op(m, "source")
			o.Subtasks[0].Operator, o.Subtasks[0].Bytes = nil, 0
		}, "operator source: its operator states hold 1 entries, but no subtask has operator state"},
		{"no state, no subtasks", func(m *savepoint.Metadata) {
			o := op(m, "source")
			o.States, o.Subtasks = nil, nil
		}, ""},
		{"subtask outside parallelism", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[1].Index = 2 }, "operator counter: subtask 2 is outside [0, 2)"},
		{"negative subtask", func(m *savepoint.Metadata) { op(m, "source").Subtasks[0].Index = -1 }, "operator source: subtask -1 is outside [0, 1)"},
		{"subtask twice", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[1].Index = 0 }, "operator counter: subtask 0 is listed twice"},
		{"negative bytes", func(m *savepoint.Metadata) { op(m, "source").Subtasks[0].Bytes = -1 }, `operator source, subtask 0: "bytes" is -1`},
		{"bytes without handles", func(m *savepoint.Metadata) { op(m, "source").Subtasks[0].Operator = nil },
			`operator source, subtask 0: "bytes" is 30, but its handles hold 0: a handle or file is missing`},
		{"inline bytes do not add up", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[1].Bytes = 41 },
			`operator counter, subtask 1: "bytes" is 41, but its handles hold 40`},
		{"native file dropped", func(m *savepoint.Metadata) {
			n := op(m, "lsm").Subtasks[0].Keyed.Native
			n.Files = n.Files[:1]
		}, `operator lsm, subtask 0: "bytes" is 70, but its handles hold 60`},
		{"key groups without stream", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[0].Keyed.Stream = nil },
			`operator counter, subtask 0: keyed: it lists 2 key groups but has no "stream"`},
		{"stream without path or bytes", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[0].Keyed.Stream.Path = "" },
			"operator counter, subtask 0: keyed.keyGroups[0] has neither a path nor inline bytes"},
		{"stream outside the snapshot", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[0].Keyed.Stream.Path = "../../etc/passwd" },
			"keyed.keyGroups[0]: state file path '../../etc/passwd' points outside the snapshot"},
		{"negative offset", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[0].Keyed.KeyGroups[0].Offset = -1 },
			"keyed.keyGroups[0]: a block at offset -1 of 40 bytes is impossible"},
		{"block too short", func(m *savepoint.Metadata) { op(m, "source").Subtasks[0].Operator.Length = 3 },
			"operator source, subtask 0: operator: a block at offset 12 of 3 bytes is impossible"},
		{"inline block outside", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[1].Keyed.KeyGroups[0].Length = 29 },
			"keyed.keyGroups[0]: the block [12, +29) is outside its 40 inline bytes"},
		{"operator state in another file", func(m *savepoint.Metadata) {
			st := &op(m, "counter").Subtasks[0]
			st.Operator = &savepoint.StreamStateHandle{Path: "other", Offset: 100, Length: 10}
		}, "keyed.stream and operator are in different state files"},
		{"key groups outside the range", func(m *savepoint.Metadata) { op(m, "counter").Subtasks[0].Keyed.End = 4 },
			"the key groups of operator counter do not cover [0, 8) exactly once: subtask 0 has the range [0, 4]"},
		{"blocks and native files", func(m *savepoint.Metadata) {
			op(m, "lsm").Subtasks[0].Keyed.KeyGroups = []savepoint.KeyGroupOffset{{KeyGroup: 0, Offset: 12, Length: 8}}
		}, "operator lsm, subtask 0: keyed: it has both key-group blocks and native files"},
		{"native without files", func(m *savepoint.Metadata) { op(m, "lsm").Subtasks[0].Keyed.Native.Files = nil }, `keyed: "native" lists no files`},
		{"native name not plain", func(m *savepoint.Metadata) { op(m, "lsm").Subtasks[0].Keyed.Native.Files[0].Name = "../x" },
			`keyed: native.files[0]: name "../x" is not a plain file name`},
		{"native name twice", func(m *savepoint.Metadata) { op(m, "lsm").Subtasks[0].Keyed.Native.Files[1].Name = "000007.sst" },
			"keyed: native file 000007.sst is listed twice"},
		{"native path outside", func(m *savepoint.Metadata) { op(m, "lsm").Subtasks[0].Keyed.Native.Files[0].Path = "/etc/passwd" },
			"keyed: native file 000007.sst: native state file path '/etc/passwd' points outside the snapshot"},
		{"native negative size", func(m *savepoint.Metadata) {
			st := &op(m, "lsm").Subtasks[0]
			st.Keyed.Native.Files[0].Size, st.Bytes = -60, -50
		}, `"bytes" is -50`},
		{"native bad checksum", func(m *savepoint.Metadata) { op(m, "lsm").Subtasks[0].Keyed.Native.Files[0].CRC32C = "xyz" },
			`keyed: native file 000007.sst: crc32c "xyz" is not 8 hex digits`},
		{"negative materialization", func(m *savepoint.Metadata) { op(m, "logged").Subtasks[0].Keyed.Changelog.MaterializationID = -1 },
			"keyed: changelog.materializationId is -1"},
		{"materialized state but id 0", func(m *savepoint.Metadata) { op(m, "logged").Subtasks[0].Keyed.Changelog.MaterializationID = 0 },
			"changelog.materializationId is 0 (nothing materialized yet), but it refers to materialized state"},
		{"materialized size without state", func(m *savepoint.Metadata) { op(m, "logged").Subtasks[0].Keyed.Native = nil },
			"changelog.materializedSize is 300, but it refers to no materialized state"},
		{"materialized size not the files'", func(m *savepoint.Metadata) {
			st := &op(m, "logged").Subtasks[0]
			st.Keyed.Changelog.MaterializedSize, st.Bytes = 299, 399
		}, "changelog.materializedSize is 299, but its native files hold 300"},
		{"empty log", func(m *savepoint.Metadata) {
			op(m, "logged").Subtasks[0].Keyed.Changelog.Log = []savepoint.ChangelogFile{}
		},
			`operator logged, subtask 0: "bytes" is 400, but its handles hold 300: a handle or file is missing`},
		{"empty log, nothing materialized", func(m *savepoint.Metadata) {
			st := &op(m, "logged").Subtasks[0]
			st.Keyed.Native, st.Keyed.Changelog.MaterializationID, st.Keyed.Changelog.MaterializedSize = nil, 0, 0
			st.Keyed.Changelog.Log, st.Bytes = nil, 0
		}, "operator logged: its keyed states hold 9 entries, but no subtask has keyed state"},
		{"log not a log file", func(m *savepoint.Metadata) { op(m, "logged").Subtasks[0].Keyed.Changelog.Log[0].Path = "/etc/passwd" },
			`changelog.log[0]: "/etc/passwd" is not a state changelog file`},
		{"log shorter than its header", func(m *savepoint.Metadata) {
			st := &op(m, "logged").Subtasks[0]
			st.Keyed.Changelog.Log[0].Size, st.Bytes = 11, 371
		}, "changelog.log[0]: /dstl/j/dstl/logged-0-1.log: size 11 is below a log file's 12-byte header"},
		{"log bad checksum", func(m *savepoint.Metadata) { op(m, "logged").Subtasks[0].Keyed.Changelog.Log[0].CRC32C = "1234567" },
			`crc32c "1234567" is not 8 hex digits`},
		{"log file twice", func(m *savepoint.Metadata) {
			st := &op(m, "logged").Subtasks[0]
			st.Keyed.Changelog.Log = append(st.Keyed.Changelog.Log, st.Keyed.Changelog.Log[0])
			st.Bytes += 40
		}, "changelog.log[2]: /dstl/j/dstl/logged-0-1.log is listed twice: its changes would be replayed twice"},
		{"channel without peer", func(m *savepoint.Metadata) {
			st := &op(m, "source").Subtasks[0]
			st.OutputChannels = []savepoint.ChannelStateHandle{{Channel: 0, Records: 1, Stream: savepoint.StreamStateHandle{Path: "src-0", Offset: 30, Length: 8}}}
		}, "resultSubpartitionState[0] has no peer"},
		{"channel negative records", func(m *savepoint.Metadata) {
			st := &op(m, "source").Subtasks[0]
			st.OutputChannels = []savepoint.ChannelStateHandle{{Peer: "counter", Channel: 1, Records: -1, Stream: savepoint.StreamStateHandle{Path: "src-0", Offset: 30, Length: 8}}}
		}, "resultSubpartitionState[0] has -1 records"},
		{"channel index", func(m *savepoint.Metadata) {
			st := &op(m, "source").Subtasks[0]
			st.InputChannels = []savepoint.ChannelStateHandle{{Peer: "x", Channel: -2, Stream: savepoint.StreamStateHandle{Path: "src-0", Offset: 30, Length: 8}}}
		}, "inputChannelState[0]: channel -2"},
		{"checksums absent (written before them)", func(m *savepoint.Metadata) {
			for i := range m.Operators {
				for _, st := range m.Operators[i].Subtasks {
					if st.Keyed != nil && st.Keyed.Native != nil {
						for j := range st.Keyed.Native.Files {
							st.Keyed.Native.Files[j].CRC32C = ""
						}
					}
					if st.Keyed != nil && st.Keyed.Changelog != nil {
						for j := range st.Keyed.Changelog.Log {
							st.Keyed.Changelog.Log[j].CRC32C = ""
						}
					}
				}
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validMetadata()
			tc.edit(m)
			err := restore.Validate(m)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want an error with %q", err, tc.want)
			}
		})
	}
}
