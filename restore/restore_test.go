package restore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

const jobID = "cca7bc1e257f0dab0123456789abcdef"

// ---------------------------------------------------------------------------
// building snapshots with the savepoint package's real writers

type subSpec struct {
	index int
	kgs   map[int]string // key group -> payload; non-nil means keyed state
	// rng, when set, is written as the keyed handle's range instead of
	// the one Flink's formula gives the subtask.
	rng *[2]int
	ops []savepoint.OperatorListState
	// opRaw, when set, is stored as the operator state block instead of
	// the encoding of ops.
	opRaw []byte
}

type opSpec struct {
	uid      string
	par      int
	maxPar   int
	finished bool
	inline   bool
	states   []savepoint.StateDescriptor
	subs     []subSpec
}

func stateFileName(uid string, index int) string { return fmt.Sprintf("%s-%d.state", uid, index) }

func writeSnapshot(t *testing.T, dir string, id int64, ops ...opSpec) *savepoint.Metadata {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &savepoint.Metadata{Version: savepoint.MetadataVersion, JobID: jobID, JobName: "test", CheckpointID: id,
		Kind: savepoint.KindCheckpoint, Format: savepoint.FormatNative, Backend: "hashmap"}
	for _, o := range ops {
		opState := savepoint.OperatorState{UID: o.uid, Parallelism: o.par, MaxParallelism: o.maxPar, Finished: o.finished, States: o.states}
		for _, s := range o.subs {
			b := savepoint.NewStateFileBuilder()
			st := savepoint.SubtaskState{Index: s.index}
			stream := &savepoint.StreamStateHandle{}
			if s.kgs != nil {
				kgs := make([]int, 0, len(s.kgs))
				for kg := range s.kgs {
					kgs = append(kgs, kg)
				}
				slices.Sort(kgs)
				kh := &savepoint.KeyedStateHandle{Stream: stream}
				kh.Start, kh.End = restore.KeyGroupRange(o.maxPar, o.par, s.index)
				if s.rng != nil {
					kh.Start, kh.End = s.rng[0], s.rng[1]
				}
				for _, kg := range kgs {
					off, n := b.AddBlock([]byte(s.kgs[kg]))
					kh.KeyGroups = append(kh.KeyGroups, savepoint.KeyGroupOffset{KeyGroup: kg, Offset: off, Length: n})
				}
				st.Keyed = kh
			}
			if s.ops != nil || s.opRaw != nil {
				data := s.opRaw
				if data == nil {
					data = savepoint.EncodeOperatorState(s.ops)
				}
				off, n := b.AddBlock(data)
				st.Operator = &savepoint.StreamStateHandle{Offset: off, Length: n}
			}
			if !b.Empty() {
				if o.inline {
					stream.Inline = b.Bytes()
				} else {
					stream.Path = stateFileName(o.uid, s.index)
					if err := vfs.WriteFileSynced(vfs.Default, filepath.Join(dir, stream.Path), b.Bytes()); err != nil {
						t.Fatal(err)
					}
				}
				if st.Operator != nil {
					st.Operator.Path, st.Operator.Inline = stream.Path, stream.Inline
				}
				st.Bytes = b.Size()
			}
			opState.Subtasks = append(opState.Subtasks, st)
		}
		m.Operators = append(m.Operators, opState)
	}
	if err := savepoint.WriteMetadata(vfs.Default, dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// keyedOp is an operator with keyed state in every key group of [from, to].
func keyedOp(uid string, maxPar int, from, to int) opSpec {
	kgs := map[int]string{}
	for kg := from; kg <= to; kg++ {
		kgs[kg] = fmt.Sprintf("%s/kg-%d", uid, kg)
	}
	return opSpec{uid: uid, par: 1, maxPar: maxPar, subs: []subSpec{{index: 0, kgs: kgs}}}
}

func split(name string, items ...string) savepoint.OperatorListState {
	return listState(name, savepoint.SplitDistribute, items...)
}

func union(name string, items ...string) savepoint.OperatorListState {
	return listState(name, savepoint.Union, items...)
}

func listState(name string, mode savepoint.Redistribution, items ...string) savepoint.OperatorListState {
	s := savepoint.OperatorListState{Name: name, Mode: mode}
	for _, it := range items {
		s.Items = append(s.Items, []byte(it))
	}
	return s
}

func itemsOf(sr restore.SubtaskRestore, name string) []string {
	for _, s := range sr.OperatorState {
		if s.Name == name {
			out := []string{}
			for _, it := range s.Items {
				out = append(out, string(it))
			}
			return out
		}
	}
	return nil
}

func resolve(t *testing.T, ptr string) *restore.Resolved {
	t.Helper()
	r, err := restore.Resolve(vfs.Default, ptr)
	if err != nil {
		t.Fatalf("Resolve(%q): %v", ptr, err)
	}
	return r
}

func mustErrExactly(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if err.Error() != want {
		t.Fatalf("error:\n %s\nwant:\n %s", err, want)
	}
}

func mustErrContains(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}

// ---------------------------------------------------------------------------
// Resolve

func TestResolveSnapshotPointers(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "savepoint-cca7bc-bb1e257f0dab")
	want := writeSnapshot(t, dir, 7, keyedOp("counter", 128, 0, 3))
	meta := filepath.Join(dir, "_metadata")
	renamed := filepath.Join(root, "elsewhere.bin")
	data, _ := os.ReadFile(meta)
	os.WriteFile(renamed, data, 0o644)

	cases := []struct {
		ptr, dir, meta string
	}{
		{dir, dir, meta},
		{dir + "/", dir, meta},
		{meta, dir, meta},
		{renamed, root, renamed},
		{"file:" + dir, dir, meta},
		{"file://" + dir, dir, meta},
		{"file://localhost" + dir, dir, meta},
		{"file:" + meta, dir, meta},
		{"file://" + meta, dir, meta},
	}
	for _, c := range cases {
		r := resolve(t, c.ptr)
		if r.Pointer != c.ptr || r.Dir != c.dir || r.MetadataFile != c.meta {
			t.Errorf("Resolve(%q) = pointer %q dir %q meta %q; want dir %q meta %q", c.ptr, r.Pointer, r.Dir, r.MetadataFile, c.dir, c.meta)
		}
		if r.Metadata == nil || r.Metadata.CheckpointID != 7 || r.Metadata.JobID != want.JobID || len(r.Metadata.Operators) != 1 {
			t.Errorf("Resolve(%q) metadata %+v", c.ptr, r.Metadata)
		}
		if len(r.Notes) != 0 {
			t.Errorf("Resolve(%q) notes %q", c.ptr, r.Notes)
		}
	}
}

func TestResolveRelativePointer(t *testing.T) {
	root := t.TempDir()
	writeSnapshot(t, filepath.Join(root, "sp"), 1, keyedOp("a", 8, 0, 0))
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	t.Chdir(root)
	r := resolve(t, "sp")
	if r.Dir != filepath.Join(root, "sp") || r.Pointer != "sp" {
		t.Fatalf("Resolve(sp) = dir %q pointer %q", r.Dir, r.Pointer)
	}
	_, err := restore.Resolve(vfs.Default, "empty")
	mustErrExactly(t, err, "Cannot find meta data file '_metadata' in directory '"+filepath.Join(root, "empty")+"'. Please try to load the checkpoint/savepoint directly from the metadata file instead of the directory.")
	_, err = restore.Resolve(vfs.Default, "nope")
	mustErrExactly(t, err, "Cannot find checkpoint or savepoint file/directory 'nope' on file system 'file'.")
}

func TestResolveMissing(t *testing.T) {
	root := t.TempDir()
	for _, ptr := range []string{
		filepath.Join(root, "missing"),
		"file:" + filepath.Join(root, "missing"),
		"file://" + filepath.Join(root, "missing", "_metadata"),
	} {
		r, err := restore.Resolve(vfs.Default, ptr)
		mustErrExactly(t, err, "Cannot find checkpoint or savepoint file/directory '"+ptr+"' on file system 'file'.")
		if r != nil {
			t.Errorf("Resolve(%q) returned %+v with the error", ptr, r)
		}
	}
}

func TestResolveDirectoryWithoutMetadata(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "job")
	// Neither _metadata nor chk-N; other entries do not count.
	for _, d := range []string{"shared", "taskowned", "chk-", "chk-0", "chk-01", "chk-x", "savepoint-cca7bc-bb1e257f0dab"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "chk-5"), []byte("a file, not a directory"), 0o644)
	want := "Cannot find meta data file '_metadata' in directory '" + dir + "'. Please try to load the checkpoint/savepoint directly from the metadata file instead of the directory."
	for _, ptr := range []string{dir, dir + "/", "file:" + dir} {
		_, err := restore.Resolve(vfs.Default, ptr)
		mustErrExactly(t, err, want)
	}
}

func TestResolveOtherErrors(t *testing.T) {
	_, err := restore.Resolve(vfs.Default, "")
	mustErrExactly(t, err, "empty checkpoint pointer")
	_, err = restore.Resolve(vfs.Default, "hdfs://nn/savepoints/sp-1")
	mustErrContains(t, err, "'hdfs' scheme")

	dir := t.TempDir()
	meta := filepath.Join(dir, "_metadata")
	os.WriteFile(meta, []byte("not metadata"), 0o644)
	for _, ptr := range []string{dir, meta} {
		_, err := restore.Resolve(vfs.Default, ptr)
		mustErrContains(t, err, "Failed to read checkpoint/savepoint '"+ptr+"'", "bad magic number")
		if !errors.Is(err, savepoint.ErrCorrupt) {
			t.Fatalf("error %q does not wrap ErrCorrupt", err)
		}
	}
	efs := vfs.ErrorFS{FS: vfs.Default, Inj: vfs.FailNth(1, func(op vfs.Op, _ string) bool { return op == vfs.OpStat })}
	_, err = restore.Resolve(efs, dir)
	mustErrContains(t, err, "Cannot access file system for checkpoint/savepoint path '"+dir+"'")
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("error %q does not wrap the cause", err)
	}
}

// writeJobDir writes chk-1..chk-n, each a complete checkpoint with a state
// file, in root/<jobId>.
func writeJobDir(t *testing.T, root string, ids ...int64) string {
	t.Helper()
	jobDir := filepath.Join(root, jobID)
	os.MkdirAll(filepath.Join(jobDir, "shared"), 0o755)
	os.MkdirAll(filepath.Join(jobDir, "taskowned"), 0o755)
	for _, id := range ids {
		writeSnapshot(t, savepoint.CheckpointDir(jobDir, id), id, keyedOp("counter", 128, 0, 9))
	}
	return jobDir
}

func TestResolveJobDirectoryPicksNewest(t *testing.T) {
	jobDir := writeJobDir(t, t.TempDir(), 1, 2, 3)
	for _, ptr := range []string{jobDir, "file:" + jobDir} {
		r := resolve(t, ptr)
		chk3 := filepath.Join(jobDir, "chk-3")
		if r.Dir != chk3 || r.MetadataFile != filepath.Join(chk3, "_metadata") || r.Metadata.CheckpointID != 3 {
			t.Fatalf("Resolve(job dir) = %q (id %d)", r.Dir, r.Metadata.CheckpointID)
		}
		if len(r.Notes) != 0 || r.JobDir != jobDir {
			t.Fatalf("notes %q, job dir %q; want no notes and %q", r.Notes, r.JobDir, jobDir)
		}
	}
}

func TestResolveJobDirectoryOrdersNumerically(t *testing.T) {
	jobDir := writeJobDir(t, t.TempDir(), 9, 10, 2)
	r := resolve(t, jobDir)
	if r.Metadata.CheckpointID != 10 || filepath.Base(r.Dir) != "chk-10" {
		t.Fatalf("picked %q", r.Dir)
	}
	ids, err := restore.CheckpointIDs(vfs.Default, jobDir)
	if err != nil || !slices.Equal(ids, []int64{2, 9, 10}) {
		t.Fatalf("CheckpointIDs = %v, %v", ids, err)
	}
	if _, err := restore.CheckpointIDs(vfs.Default, filepath.Join(jobDir, "nope")); err == nil {
		t.Fatal("CheckpointIDs of a missing directory succeeded")
	}
}

func TestResolveJobDirectorySkipsBadCheckpoints(t *testing.T) {
	damage := []struct {
		name  string
		spoil func(t *testing.T, chk string)
		note  []string
	}{
		{"no metadata", func(t *testing.T, chk string) {
			os.Remove(filepath.Join(chk, "_metadata"))
		}, []string{"it has no _metadata (the checkpoint never completed)."}},
		{"metadata checksum", func(t *testing.T, chk string) {
			p := filepath.Join(chk, "_metadata")
			data, _ := os.ReadFile(p)
			data[len(data)/2] ^= 0x20
			os.WriteFile(p, data, 0o644)
		}, []string{"failed its checksum"}},
		{"metadata truncated", func(t *testing.T, chk string) {
			p := filepath.Join(chk, "_metadata")
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)-10], 0o644)
		}, []string{"truncated"}},
		{"state file corrupt", func(t *testing.T, chk string) {
			p := filepath.Join(chk, stateFileName("counter", 0))
			data, _ := os.ReadFile(p)
			data[len(data)-6] ^= 0x01
			os.WriteFile(p, data, 0o644)
		}, []string{stateFileName("counter", 0), "failed its checksum"}},
		{"state file missing", func(t *testing.T, chk string) {
			os.Remove(filepath.Join(chk, stateFileName("counter", 0)))
		}, []string{"open state file", "no such file"}},
		{"state file truncated", func(t *testing.T, chk string) {
			os.Truncate(filepath.Join(chk, stateFileName("counter", 0)), 30)
		}, []string{"is truncated"}},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			jobDir := writeJobDir(t, t.TempDir(), 1, 2, 3)
			chk3 := filepath.Join(jobDir, "chk-3")
			chk2 := filepath.Join(jobDir, "chk-2")
			d.spoil(t, chk3)
			r := resolve(t, jobDir)
			if r.Dir != chk2 || r.Metadata.CheckpointID != 2 {
				t.Fatalf("picked %q", r.Dir)
			}
			if len(r.Notes) != 1 || r.JobDir != jobDir {
				t.Fatalf("notes %q, job dir %q", r.Notes, r.JobDir)
			}
			if !strings.HasPrefix(r.Notes[0], "Skipping "+chk3+": ") {
				t.Fatalf("note %q does not name %s", r.Notes[0], chk3)
			}
			for _, w := range d.note {
				if !strings.Contains(r.Notes[0], w) {
					t.Fatalf("note %q does not say %q", r.Notes[0], w)
				}
			}
		})
	}
}

func TestResolveJobDirectoryAllBad(t *testing.T) {
	jobDir := writeJobDir(t, t.TempDir(), 1, 2, 3)
	os.Remove(filepath.Join(jobDir, "chk-3", "_metadata"))
	os.Remove(filepath.Join(jobDir, "chk-2", stateFileName("counter", 0)))
	os.WriteFile(filepath.Join(jobDir, "chk-1", "_metadata"), []byte("GFLKMETA"), 0o644)
	r, err := restore.Resolve(vfs.Default, jobDir)
	mustErrExactly(t, err, "No complete checkpoint found in job checkpoint directory '"+jobDir+"'.")
	// The reasons travel with the error, for the caller to print.
	if r == nil || len(r.Notes) != 3 {
		t.Fatalf("resolved %+v", r)
	}
	for i, id := range []string{"chk-3", "chk-2", "chk-1"} {
		if !strings.HasPrefix(r.Notes[i], "Skipping "+filepath.Join(jobDir, id)+": ") {
			t.Fatalf("note %d = %q", i, r.Notes[i])
		}
	}
	if r.Metadata != nil {
		t.Fatal("metadata set although nothing was found")
	}
}

func TestVerifyStateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	m := writeSnapshot(t, dir, 1, keyedOp("counter", 128, 0, 20),
		opSpec{uid: "src", par: 2, maxPar: 128, inline: true, subs: []subSpec{
			{index: 0, ops: []savepoint.OperatorListState{split("s", "a")}},
			{index: 1, ops: []savepoint.OperatorListState{split("s", "b")}},
		}})
	if err := restore.VerifyStateFiles(vfs.Default, dir, m); err != nil {
		t.Fatal(err)
	}
	m.Operators[1].Subtasks[1].Operator.Inline[20] ^= 1
	err := restore.VerifyStateFiles(vfs.Default, dir, m)
	if !errors.Is(err, savepoint.ErrCorrupt) {
		t.Fatalf("damaged inline block: %v", err)
	}
}

// ---------------------------------------------------------------------------
// NewPlan: keyed state

// flinkRange is Flink's KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex.
func flinkRange(maxPar, par, i int) (int, int) {
	return (i*maxPar + par - 1) / par, ((i+1)*maxPar - 1) / par
}

// checkKeyedPlan asserts that every key group of [0, maxPar) with state
// goes to the subtask owning it and that its block reads back.
func checkKeyedPlan(t *testing.T, p *restore.Plan, uid string, maxPar, par int, from, to int) map[int]map[int]string {
	t.Helper()
	op := p.Operators[uid]
	if op == nil {
		t.Fatalf("no plan for %s", uid)
	}
	if len(op.Subtasks) != par || op.MaxParallelism != maxPar {
		t.Fatalf("%s: %d subtasks, max parallelism %d; want %d, %d", uid, len(op.Subtasks), op.MaxParallelism, par, maxPar)
	}
	br := &savepoint.BlockReader{FS: vfs.Default, Dir: p.Dir}
	defer br.Close()
	got := map[int]map[int]string{}
	seen := map[int]bool{}
	for i, st := range op.Subtasks {
		got[i] = map[int]string{}
		lo, hi := flinkRange(maxPar, par, i)
		for _, kg := range st.KeyGroups {
			if kg.KeyGroup*par/maxPar != i || kg.KeyGroup < lo || kg.KeyGroup > hi {
				t.Fatalf("%s: key group %d went to subtask %d (range [%d,%d])", uid, kg.KeyGroup, i, lo, hi)
			}
			if seen[kg.KeyGroup] {
				t.Fatalf("%s: key group %d restored twice", uid, kg.KeyGroup)
			}
			seen[kg.KeyGroup] = true
			payload, err := br.Read(kg.Stream, kg.Offset, kg.Length)
			if err != nil {
				t.Fatalf("%s: key group %d: %v", uid, kg.KeyGroup, err)
			}
			if want := fmt.Sprintf("%s/kg-%d", uid, kg.KeyGroup); string(payload) != want {
				t.Fatalf("%s: key group %d reads %q, want %q", uid, kg.KeyGroup, payload, want)
			}
			got[i][kg.KeyGroup] = string(payload)
		}
	}
	for kg := from; kg <= to; kg++ {
		if !seen[kg] {
			t.Fatalf("%s: key group %d was not restored", uid, kg)
		}
	}
	if len(seen) != to-from+1 {
		t.Fatalf("%s: %d key groups restored, want %d", uid, len(seen), to-from+1)
	}
	return got
}

func TestPlanKeyedRescale1to4to2(t *testing.T) {
	root := t.TempDir()
	dir1 := filepath.Join(root, "sp-1")
	writeSnapshot(t, dir1, 1, keyedOp("counter", 128, 0, 127))

	job4 := restore.Job{Operators: []restore.Operator{{UID: "counter", Parallelism: 4, MaxParallelism: 128}}}
	p4, err := restore.NewPlan(vfs.Default, resolve(t, dir1), job4, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	by4 := checkKeyedPlan(t, p4, "counter", 128, 4, 0, 127)
	for i := 0; i < 4; i++ {
		if len(by4[i]) != 32 || by4[i][32*i] == "" || by4[i][32*i+31] == "" {
			t.Fatalf("subtask %d of 4 holds %d key groups", i, len(by4[i]))
		}
	}

	// The job at parallelism 4 takes a checkpoint: each subtask writes the
	// key groups it restored.
	dir4 := filepath.Join(root, "sp-4")
	spec := opSpec{uid: "counter", par: 4, maxPar: 128}
	for i := 0; i < 4; i++ {
		spec.subs = append(spec.subs, subSpec{index: i, kgs: by4[i]})
	}
	writeSnapshot(t, dir4, 2, spec)

	job2 := restore.Job{Operators: []restore.Operator{{UID: "counter", Parallelism: 2, MaxParallelism: 128}}}
	p2, err := restore.NewPlan(vfs.Default, resolve(t, dir4), job2, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	by2 := checkKeyedPlan(t, p2, "counter", 128, 2, 0, 127)
	for i := 0; i < 2; i++ {
		if len(by2[i]) != 64 {
			t.Fatalf("subtask %d of 2 holds %d key groups", i, len(by2[i]))
		}
		// Blocks come from the two files of the old subtasks 2i and 2i+1.
		files := map[string]bool{}
		for _, kg := range p2.Operators["counter"].Subtasks[i].KeyGroups {
			files[kg.Stream.Path] = true
		}
		if !files[stateFileName("counter", 2*i)] || !files[stateFileName("counter", 2*i+1)] || len(files) != 2 {
			t.Fatalf("subtask %d reads files %v", i, files)
		}
	}
}

func TestPlanKeyedAssignmentFormula(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct{ maxPar, oldPar, newPar int }{
		{10, 1, 3}, {10, 3, 7}, {7, 7, 2}, {128, 3, 5}, {5, 2, 5}, {1, 1, 1},
	} {
		dir := filepath.Join(root, fmt.Sprintf("sp-%d-%d-%d", c.maxPar, c.oldPar, c.newPar))
		spec := opSpec{uid: "k", par: c.oldPar, maxPar: c.maxPar}
		for i := 0; i < c.oldPar; i++ {
			lo, hi := flinkRange(c.maxPar, c.oldPar, i)
			kgs := map[int]string{}
			for kg := lo; kg <= hi; kg++ {
				kgs[kg] = fmt.Sprintf("k/kg-%d", kg)
			}
			spec.subs = append(spec.subs, subSpec{index: i, kgs: kgs})
		}
		writeSnapshot(t, dir, 1, spec)
		job := restore.Job{Operators: []restore.Operator{{UID: "k", Parallelism: c.newPar, MaxParallelism: c.maxPar, MaxParallelismExplicit: true}}}
		p, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		checkKeyedPlan(t, p, "k", c.maxPar, c.newPar, 0, c.maxPar-1)
	}
}

func TestPlanInlineKeyedState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	op := keyedOp("counter", 16, 0, 15)
	op.inline = true
	writeSnapshot(t, dir, 1, op)
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("inline snapshot has %d files", len(files))
	}
	job := restore.Job{Operators: []restore.Operator{{UID: "counter", Parallelism: 3, MaxParallelism: 16}}}
	p, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkKeyedPlan(t, p, "counter", 16, 3, 0, 15)
}

// ---------------------------------------------------------------------------
// NewPlan: operator state

func sourceOp() opSpec {
	return opSpec{uid: "src", par: 3, maxPar: 128, subs: []subSpec{
		{index: 0, ops: []savepoint.OperatorListState{split("splits", "a0", "a1"), union("u", "u0")}},
		{index: 1, ops: []savepoint.OperatorListState{split("splits", "b0"), union("u", "u1")}},
		{index: 2, ops: []savepoint.OperatorListState{split("splits", "c0", "c1", "c2"), union("u", "u2")}},
	}}
}

func planSource(t *testing.T, dir string, par int) *restore.OperatorPlan {
	t.Helper()
	job := restore.Job{Operators: []restore.Operator{{UID: "src", Parallelism: par, MaxParallelism: 128}}}
	p, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	op := p.Operators["src"]
	if op == nil || len(op.Subtasks) != par {
		t.Fatalf("plan %+v", op)
	}
	return op
}

func TestPlanOperatorStateSameParallelismKeepsOwnItems(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	writeSnapshot(t, dir, 1, sourceOp())
	op := planSource(t, dir, 3)
	want := [][]string{{"a0", "a1"}, {"b0"}, {"c0", "c1", "c2"}}
	for i, st := range op.Subtasks {
		if got := itemsOf(st, "splits"); !slices.Equal(got, want[i]) {
			t.Errorf("subtask %d splits %q, want %q", i, got, want[i])
		}
		if got := itemsOf(st, "u"); !slices.Equal(got, []string{"u0", "u1", "u2"}) {
			t.Errorf("subtask %d union %q", i, got)
		}
		if len(st.KeyGroups) != 0 {
			t.Errorf("subtask %d has key groups", i)
		}
	}
}

func TestPlanOperatorStateRescaled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	writeSnapshot(t, dir, 1, sourceOp())
	all := []string{"a0", "a1", "b0", "c0", "c1", "c2"}
	exact := map[int][][]string{
		1: {all},
		2: {{"a0", "a1", "b0"}, {"c0", "c1", "c2"}},
		// Flink's rule: the first n%par subtasks get one element more.
		4: {{"a0", "a1"}, {"b0", "c0"}, {"c1"}, {"c2"}},
		5: {{"a0", "a1"}, {"b0"}, {"c0"}, {"c1"}, {"c2"}},
	}
	for par := 1; par <= 9; par++ {
		if par == 3 {
			continue
		}
		op := planSource(t, dir, par)
		var concat []string
		lo, hi := len(all), 0
		for i, st := range op.Subtasks {
			got := itemsOf(st, "splits")
			if got == nil {
				t.Fatalf("par %d: subtask %d has no 'splits' state", par, i)
			}
			concat = append(concat, got...)
			lo, hi = min(lo, len(got)), max(hi, len(got))
			if want, ok := exact[par]; ok && !slices.Equal(got, want[i]) {
				t.Errorf("par %d: subtask %d splits %q, want %q", par, i, got, want[i])
			}
			if u := itemsOf(st, "u"); !slices.Equal(u, []string{"u0", "u1", "u2"}) {
				t.Errorf("par %d: subtask %d union %q", par, i, u)
			}
		}
		if !slices.Equal(concat, all) {
			t.Errorf("par %d: parts are not a contiguous cut: %q", par, concat)
		}
		if hi-lo > 1 {
			t.Errorf("par %d: part sizes range from %d to %d", par, lo, hi)
		}
	}
}

func TestPlanOperatorStateBySubtaskIndex(t *testing.T) {
	// Subtask 1 did not report state: the snapshot lists subtasks 2 and 0,
	// out of order. Positions in the list are not subtask indices.
	spec := opSpec{uid: "src", par: 3, maxPar: 128, subs: []subSpec{
		{index: 2, ops: []savepoint.OperatorListState{split("splits", "c0", "c1")}},
		{index: 0, ops: []savepoint.OperatorListState{split("splits", "a0")}},
	}}
	dir := filepath.Join(t.TempDir(), "sp")
	writeSnapshot(t, dir, 1, spec)

	op := planSource(t, dir, 3)
	want := [][]string{{"a0"}, nil, {"c0", "c1"}}
	for i, st := range op.Subtasks {
		if got := itemsOf(st, "splits"); len(got) != len(want[i]) || !slices.Equal(got, want[i]) {
			t.Errorf("par 3: subtask %d splits %q, want %q", i, got, want[i])
		}
	}
	// Parallelism 2 is a change (from 3), although two subtasks have state.
	op = planSource(t, dir, 2)
	want = [][]string{{"a0", "c0"}, {"c1"}}
	for i, st := range op.Subtasks {
		if got := itemsOf(st, "splits"); !slices.Equal(got, want[i]) {
			t.Errorf("par 2: subtask %d splits %q, want %q", i, got, want[i])
		}
	}
}

func TestPlanOperatorStateWithKeyedState(t *testing.T) {
	spec := keyedOp("both", 8, 0, 7)
	spec.subs[0].ops = []savepoint.OperatorListState{split("s", "x", "y")}
	dir := filepath.Join(t.TempDir(), "sp")
	writeSnapshot(t, dir, 1, spec)
	job := restore.Job{Operators: []restore.Operator{{UID: "both", Parallelism: 2, MaxParallelism: 8}}}
	p, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkKeyedPlan(t, p, "both", 8, 2, 0, 7)
	if a, b := itemsOf(p.Operators["both"].Subtasks[0], "s"), itemsOf(p.Operators["both"].Subtasks[1], "s"); !slices.Equal(a, []string{"x"}) || !slices.Equal(b, []string{"y"}) {
		t.Fatalf("operator state %q %q", a, b)
	}
}

func TestPlanOperatorStateCorrupt(t *testing.T) {
	root := t.TempDir()

	dir := filepath.Join(root, "flipped")
	writeSnapshot(t, dir, 1, sourceOp())
	p := filepath.Join(dir, stateFileName("src", 1))
	data, _ := os.ReadFile(p)
	data[14] ^= 0x40
	os.WriteFile(p, data, 0o644)
	job := restore.Job{Operators: []restore.Operator{{UID: "src", Parallelism: 3, MaxParallelism: 128}}}
	_, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	mustErrContains(t, err, "snapshot "+savepoint.URI(dir)+", operator src, subtask 1", "failed its checksum")
	if !errors.Is(err, savepoint.ErrCorrupt) {
		t.Fatalf("error %q does not wrap ErrCorrupt", err)
	}

	// A block with a valid CRC that does not decode.
	dir = filepath.Join(root, "garbage")
	writeSnapshot(t, dir, 1, opSpec{uid: "src", par: 1, maxPar: 128, subs: []subSpec{{index: 0, opRaw: []byte{5, 1}}}})
	_, err = restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	mustErrContains(t, err, "operator src, subtask 0", "operator state: ")
	if !errors.Is(err, savepoint.ErrCorrupt) {
		t.Fatalf("error %q does not wrap ErrCorrupt", err)
	}

	// The same state name with two modes.
	dir = filepath.Join(root, "modes")
	writeSnapshot(t, dir, 1, opSpec{uid: "src", par: 2, maxPar: 128, subs: []subSpec{
		{index: 0, ops: []savepoint.OperatorListState{split("s", "a")}},
		{index: 1, ops: []savepoint.OperatorListState{union("s", "b")}},
	}})
	_, err = restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	mustErrContains(t, err, "operator src", `operator state "s" is both operator-list and operator-union-list`)
}

func TestPlanRefusesCorruptHandles(t *testing.T) {
	root := t.TempDir()
	cases := map[string]func(m *savepoint.Metadata){
		"key group beyond max parallelism": func(m *savepoint.Metadata) {
			m.Operators[0].Subtasks[0].Keyed.KeyGroups[0].KeyGroup = 128
		},
		"negative key group": func(m *savepoint.Metadata) {
			m.Operators[0].Subtasks[0].Keyed.KeyGroups[0].KeyGroup = -1
		},
		"subtask index beyond parallelism": func(m *savepoint.Metadata) {
			m.Operators[0].Subtasks[0].Index = 5
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			spec := keyedOp("k", 128, 0, 3)
			spec.subs[0].ops = []savepoint.OperatorListState{split("s", "x")}
			dir := filepath.Join(root, strings.ReplaceAll(name, " ", "-"))
			writeSnapshot(t, dir, 1, spec)
			r := resolve(t, dir)
			spoil(r.Metadata)
			job := restore.Job{Operators: []restore.Operator{{UID: "k", Parallelism: 2, MaxParallelism: 128}}}
			_, err := restore.NewPlan(vfs.Default, r, job, restore.Options{})
			if !errors.Is(err, savepoint.ErrCorrupt) {
				t.Fatalf("NewPlan = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestRedistribute(t *testing.T) {
	old := [][]savepoint.OperatorListState{
		{split("b", "b0", "b1"), union("a", "x")},
		{split("b", "b2", "b3")},
	}
	out, err := restore.Redistribute(old, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	// Names are sorted; every subtask gets every state.
	for i, states := range out {
		if len(states) != 2 || states[0].Name != "a" || states[1].Name != "b" || states[0].Mode != savepoint.Union || states[1].Mode != savepoint.SplitDistribute {
			t.Fatalf("subtask %d states %+v", i, states)
		}
	}
	// Appending to one subtask's list must not change another's.
	first := out[0][1].Items
	out[0][1].Items = append(out[0][1].Items, []byte("NEW"))
	if string(out[1][1].Items[0]) != "b2" {
		t.Fatalf("appending to subtask 0's list overwrote subtask 1's: %q (first %q)", out[1][1].Items[0], first)
	}
	out[0][0].Items = append(out[0][0].Items, []byte("NEW"))
	out[1][0].Items = append(out[1][0].Items, []byte("OTHER"))
	if string(out[0][0].Items[1]) != "NEW" || len(out[2][0].Items) != 1 {
		t.Fatalf("union lists share storage: %q %q", out[0][0].Items, out[2][0].Items)
	}

	_, err = restore.Redistribute([][]savepoint.OperatorListState{{split("s")}, {union("s")}}, 2, true)
	mustErrContains(t, err, `operator state "s" is both operator-list and operator-union-list`)

	// Broadcast state: new subtask i restores old subtask i mod 2's copy.
	bc := func(item string) savepoint.OperatorListState {
		return savepoint.OperatorListState{Name: "rules", Mode: savepoint.Broadcast, Items: [][]byte{[]byte(item)}}
	}
	out, err = restore.Redistribute([][]savepoint.OperatorListState{{bc("copy0")}, {bc("copy1")}}, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"copy0", "copy1", "copy0"} {
		if len(out[i]) != 1 || out[i][0].Mode != savepoint.Broadcast || len(out[i][0].Items) != 1 || string(out[i][0].Items[0]) != want {
			t.Fatalf("broadcast state of new subtask %d: %+v, want one item %q", i, out[i], want)
		}
	}

	out, err = restore.Redistribute(nil, 2, false)
	if err != nil || len(out) != 2 || len(out[0]) != 0 {
		t.Fatalf("no state: %v, %v", out, err)
	}
}

// ---------------------------------------------------------------------------
// NewPlan: matching

func TestPlanUnmatchedState(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "savepoint-cca7bc-bb1e257f0dab")
	gone := sourceOp()
	gone.uid = "gone"
	goneKeyed := keyedOp("goneKeyed", 128, 5, 5)
	writeSnapshot(t, dir, 1, keyedOp("keep", 128, 0, 3), gone, goneKeyed)
	r := resolve(t, dir)
	job := restore.Job{Operators: []restore.Operator{{UID: "keep", Parallelism: 1, MaxParallelism: 128}, {UID: "goneKeyed", Parallelism: 1, MaxParallelism: 128}}}
	_, err := restore.NewPlan(vfs.Default, r, job, restore.Options{})
	mustErrExactly(t, err, "Failed to rollback to checkpoint/savepoint file:"+dir+". Cannot map checkpoint/savepoint state for operator gone to the new program, because the operator is not available in the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on the CLI.")

	job = restore.Job{Operators: []restore.Operator{{UID: "keep", Parallelism: 1, MaxParallelism: 128}, {UID: "gone", Parallelism: 3, MaxParallelism: 128}}}
	_, err = restore.NewPlan(vfs.Default, r, job, restore.Options{})
	mustErrExactly(t, err, "Failed to rollback to checkpoint/savepoint file:"+dir+". Cannot map checkpoint/savepoint state for operator goneKeyed to the new program, because the operator is not available in the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on the CLI.")

	job = restore.Job{Operators: []restore.Operator{{UID: "keep", Parallelism: 2, MaxParallelism: 128}, {UID: "fresh", Parallelism: 2, MaxParallelism: 128}}}
	p, err := restore.NewPlan(vfs.Default, r, job, restore.Options{AllowNonRestoredState: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Dropped, []string{"gone", "goneKeyed"}) || !slices.Equal(p.Matched, []string{"keep"}) || !slices.Equal(p.New, []string{"fresh"}) {
		t.Fatalf("Dropped %q Matched %q New %q", p.Dropped, p.Matched, p.New)
	}
	if len(p.Operators) != 1 || p.Operators["keep"] == nil || p.Operators["gone"] != nil || p.Operators["fresh"] != nil {
		t.Fatalf("operators %v", p.Operators)
	}
	if p.Pointer != "file:"+dir || p.Dir != dir || p.Meta != r.Metadata {
		t.Fatalf("pointer %q dir %q", p.Pointer, p.Dir)
	}
	checkKeyedPlan(t, p, "keep", 128, 2, 0, 3)
}

func TestPlanUnmatchedEmptyStateIsSkipped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	writeSnapshot(t, dir, 1,
		keyedOp("keep", 128, 0, 3),
		opSpec{uid: "stateless", par: 2, maxPar: 128, subs: []subSpec{{index: 0}, {index: 1}}},
		opSpec{uid: "emptyKeyed", par: 1, maxPar: 128, subs: []subSpec{{index: 0, kgs: map[int]string{}}}},
		opSpec{uid: "noSubtasks", par: 1, maxPar: 128},
	)
	job := restore.Job{Operators: []restore.Operator{{UID: "keep", Parallelism: 1, MaxParallelism: 128}}}
	for _, allow := range []bool{false, true} {
		p, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{AllowNonRestoredState: allow})
		if err != nil {
			t.Fatalf("allow=%v: %v", allow, err)
		}
		if len(p.Dropped) != 0 || !slices.Equal(p.Matched, []string{"keep"}) || len(p.New) != 0 {
			t.Fatalf("allow=%v: Dropped %q Matched %q New %q", allow, p.Dropped, p.Matched, p.New)
		}
	}
}

func TestPlanMatchedAndNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	src := sourceOp()
	src.finished = true
	src.states = []savepoint.StateDescriptor{{Name: "splits", Kind: "operator-list", Entries: 6}, {Name: "u", Kind: "operator-union-list", Entries: 3}}
	writeSnapshot(t, dir, 1, src, keyedOp("counter", 128, 0, 127),
		opSpec{uid: "stateless", par: 1, maxPar: 128, subs: []subSpec{{index: 0}}})
	job := restore.Job{Operators: []restore.Operator{
		{UID: "fresh-source", Parallelism: 1, MaxParallelism: 128},
		{UID: "counter", Parallelism: 2, MaxParallelism: 128},
		{UID: "src", Parallelism: 3, MaxParallelism: 128},
		{UID: "stateless", Parallelism: 1, MaxParallelism: 128},
		{UID: "sink", Parallelism: 1, MaxParallelism: 128},
	}}
	p, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Matched in snapshot order, New in job order. An operator whose
	// snapshot entry is empty is still matched.
	if !slices.Equal(p.Matched, []string{"src", "counter", "stateless"}) {
		t.Fatalf("Matched %q", p.Matched)
	}
	if !slices.Equal(p.New, []string{"fresh-source", "sink"}) {
		t.Fatalf("New %q", p.New)
	}
	if len(p.Dropped) != 0 {
		t.Fatalf("Dropped %q", p.Dropped)
	}
	if op := p.Operators["src"]; !op.Finished || op.UID != "src" || len(op.States) != 2 || op.States[1].Entries != 3 {
		t.Fatalf("src plan %+v", op)
	}
	if op := p.Operators["counter"]; op.Finished {
		t.Fatal("counter marked finished")
	}
	if op := p.Operators["stateless"]; op == nil || len(op.Subtasks) != 1 || len(op.Subtasks[0].KeyGroups) != 0 || len(op.Subtasks[0].OperatorState) != 0 {
		t.Fatalf("stateless plan %+v", op)
	}
}

// ---------------------------------------------------------------------------
// NewPlan: max parallelism

func TestPlanMaxParallelism(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	writeSnapshot(t, dir, 1, keyedOp("counter", 128, 0, 127))
	r := resolve(t, dir)
	uri := "file:" + dir

	plan := func(par, maxPar int, explicit bool) (*restore.Plan, error) {
		job := restore.Job{Operators: []restore.Operator{{UID: "counter", Parallelism: par, MaxParallelism: maxPar, MaxParallelismExplicit: explicit}}}
		return restore.NewPlan(vfs.Default, r, job, restore.Options{})
	}

	_, err := plan(4, 256, true)
	mustErrExactly(t, err, "Failed to rollback to checkpoint/savepoint "+uri+". Max parallelism mismatch between checkpoint/savepoint state and new program. Cannot map operator counter with max parallelism 128 to new program with max parallelism 256. This indicates that the program has been changed in a non-compatible way after the checkpoint/savepoint.")
	_, err = plan(4, 64, true)
	mustErrContains(t, err, "Cannot map operator counter with max parallelism 128 to new program with max parallelism 64.")

	// Not set by the user: the snapshot's max parallelism is adopted and
	// used to assign key groups.
	for _, maxPar := range []int{256, 64, 0} {
		p, err := plan(4, maxPar, false)
		if err != nil {
			t.Fatalf("max parallelism %d (default): %v", maxPar, err)
		}
		if p.Operators["counter"].MaxParallelism != 128 {
			t.Fatalf("max parallelism %d (default): plan runs with %d", maxPar, p.Operators["counter"].MaxParallelism)
		}
		checkKeyedPlan(t, p, "counter", 128, 4, 0, 127)
	}
	p, err := plan(4, 128, true)
	if err != nil || p.Operators["counter"].MaxParallelism != 128 {
		t.Fatalf("same explicit max parallelism: %v", err)
	}

	// The parallelism is limited by the (adopted) max parallelism.
	_, err = plan(200, 256, false)
	mustErrExactly(t, err, "Failed to rollback to checkpoint/savepoint "+uri+". The new parallelism 200 of operator counter is higher than its max parallelism 128, which the snapshot fixes. Lower the parallelism.")
	_, err = plan(129, 128, true)
	mustErrContains(t, err, "The new parallelism 129 of operator counter is higher than its max parallelism 128")
	if _, err := plan(128, 128, true); err != nil {
		t.Fatalf("parallelism equal to max parallelism: %v", err)
	}
	for _, par := range []int{0, -1} {
		_, err = plan(par, 128, true)
		mustErrContains(t, err, fmt.Sprintf("Operator counter has parallelism %d; it must be at least 1.", par))
	}
}

func TestNativeSnapshotOnlyIntoItsBackend(t *testing.T) {
	for _, tc := range []struct {
		format  savepoint.Format
		backend string
		ok      bool
	}{
		{savepoint.FormatNative, "hashmap", true},
		{savepoint.FormatCanonical, "rocksdb", true},
		{savepoint.FormatNative, "rocksdb", false},
	} {
		dir := filepath.Join(t.TempDir(), "sp")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		md := &savepoint.Metadata{JobID: "j", CheckpointID: 1, Kind: savepoint.KindSavepoint, Format: tc.format, Backend: tc.backend,
			Operators: []savepoint.OperatorState{{UID: "source", Parallelism: 1, MaxParallelism: 128}}}
		if err := savepoint.WriteMetadata(vfs.Default, dir, md); err != nil {
			t.Fatal(err)
		}
		r, err := restore.Resolve(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = restore.NewPlan(vfs.Default, r, restore.Job{}, restore.Options{StateBackend: "hashmap"})
		if tc.ok != (err == nil) {
			t.Errorf("%s snapshot of %s into hashmap: err %v", tc.format, tc.backend, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "written by the 'rocksdb' state backend") || !strings.Contains(err.Error(), "uses the 'hashmap' state backend")) {
			t.Errorf("the error must name both backends: %v", err)
		}
	}
}

// TestPlanRefusesKeyGroupsNotCoveredOnce: a _metadata with a valid
// checksum whose key-group ranges overlap, leave a gap, or list a key group
// outside its subtask's range (or twice) is refused, naming the operator
// and the ranges; it used to restore with wrong counts.
func TestPlanRefusesKeyGroupsNotCoveredOnce(t *testing.T) {
	kgs := func(from, to int) map[int]string {
		m := map[int]string{}
		for kg := from; kg <= to; kg++ {
			m[kg] = fmt.Sprintf("kg-%d", kg)
		}
		return m
	}
	for name, c := range map[string]struct {
		subs []subSpec
		want string
	}{
		"overlap": {[]subSpec{{index: 0, kgs: kgs(0, 3)}, {index: 1, kgs: kgs(4, 7), rng: &[2]int{3, 7}}},
			"the key groups of operator counter do not cover [0, 8) exactly once: subtask 1 has the range [3, 7]; at parallelism 2 it owns [4, 7]"},
		"gap": {[]subSpec{{index: 0, kgs: kgs(0, 2), rng: &[2]int{0, 2}}, {index: 1, kgs: kgs(4, 7)}},
			"the key groups of operator counter do not cover [0, 8) exactly once: subtask 0 has the range [0, 2]; at parallelism 2 it owns [0, 3]"},
		"outside max parallelism": {[]subSpec{{index: 0, kgs: kgs(0, 3)}, {index: 1, kgs: kgs(4, 7), rng: &[2]int{4, 8}}},
			"the key groups of operator counter do not cover [0, 8) exactly once: subtask 1 has the range [4, 8]"},
		"key group outside its range": {[]subSpec{{index: 0, kgs: kgs(0, 4)}, {index: 1, kgs: kgs(5, 7)}},
			"the key groups of operator counter do not cover [0, 8) exactly once: subtask 0 with the range [0, 3] lists key group 4"},
		"subtask twice": {[]subSpec{{index: 0, kgs: kgs(0, 3)}, {index: 0, kgs: kgs(0, 3)}},
			"operator counter: subtask 0 is listed twice"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sp")
			writeSnapshot(t, dir, 1, opSpec{uid: "counter", par: 2, maxPar: 8, subs: c.subs})
			job := restore.Job{Operators: []restore.Operator{{UID: "counter", Parallelism: 2, MaxParallelism: 8}}}
			_, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{})
			if err == nil || !errors.Is(err, savepoint.ErrCorrupt) ||
				!strings.Contains(err.Error(), "Its _metadata describes state that cannot be restored") ||
				!strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want a refusal with %q", err, c.want)
			}
		})
	}
	// The same operator with the ranges Flink's formula gives restores.
	dir := filepath.Join(t.TempDir(), "ok")
	writeSnapshot(t, dir, 1, opSpec{uid: "counter", par: 2, maxPar: 8, subs: []subSpec{{index: 0, kgs: kgs(0, 3)}, {index: 1, kgs: kgs(4, 7)}}})
	job := restore.Job{Operators: []restore.Operator{{UID: "counter", Parallelism: 3, MaxParallelism: 8}}}
	if _, err := restore.NewPlan(vfs.Default, resolve(t, dir), job, restore.Options{}); err != nil {
		t.Fatal(err)
	}
}
