package lsm_test

// These tests hold native snapshots of the LSM backend (the store's own
// files, lsm_native.go) to its canonical snapshots: a store opened on the
// files of a native snapshot, or the key groups copied out of them into
// new stores (rescaling), must encode to the canonical blocks the original
// backend encoded at the moment of the snapshot, byte for byte.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/state"
	"github.com/gflink/gflink/engine/state/lsm"
	"github.com/gflink/gflink/savepoint"
)

// takeNative starts a native snapshot of b into dir (which must not exist).
func takeNative(t *testing.T, b state.Backend[string], id int64, dir string, incremental bool) *state.NativeSnapshot {
	t.Helper()
	return takeNativeWith(t, b, state.SnapshotOptions{ID: id, LocalDir: dir, Incremental: incremental})
}

// takeNativeWith is takeNative with the options o (ID, LocalDir and the
// sharing ones).
func takeNativeWith(t *testing.T, b state.Backend[string], o state.SnapshotOptions) *state.NativeSnapshot {
	t.Helper()
	id := o.ID
	o.Native, o.RemoveDir = true, os.RemoveAll
	s, err := b.TakeSnapshot(o)
	if err != nil {
		t.Fatalf("native TakeSnapshot %d: %v", id, err)
	}
	n, ok := s.(*state.NativeSnapshot)
	if !ok {
		s.Release()
		t.Fatalf("native TakeSnapshot %d gave a %T", id, s)
	}
	// Released (again: Release is idempotent) should the test fail with
	// it open, so that its backend's store closes.
	t.Cleanup(n.Release)
	if r := n.KeyGroupRange(); r != b.KeyGroupRange() {
		t.Fatalf("native snapshot %d: range %v; the backend's is %v", id, r, b.KeyGroupRange())
	}
	return n
}

// waitNative waits for a native snapshot's files.
func waitNative(t *testing.T, n *state.NativeSnapshot) {
	t.Helper()
	if err := n.Wait(); err != nil {
		t.Fatalf("native snapshot Wait: %v", err)
	}
	if len(sstFiles(t, n.Dir)) == 0 {
		t.Fatalf("native snapshot %s has no SST file", n.Dir)
	}
}

// copyFiles copies the regular files of src into dst (created), as the
// restore downloads a native snapshot's files into a working directory.
func copyFiles(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			t.Fatalf("native snapshot %s holds %s, no regular file", src, e.Name())
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			err = errors.Join(err, out.Close())
		}
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// openCopy opens a store on a copy of a native snapshot's files.
func openCopy(t *testing.T, n *state.NativeSnapshot, dir string) *lsm.Store {
	t.Helper()
	copyFiles(t, n.Dir, dir)
	// A larger write buffer than openLSM's: fewer flushes, each a file
	// synced, which is most of these tests' time.
	st, err := lsm.Open(lsm.Options{Dir: dir, BlockCacheSize: 1 << 20, WriteBufferSize: 1 << 20})
	if err != nil {
		t.Fatalf("lsm.Open on the files of %s: %v", n.Dir, err)
	}
	return st
}

// openNative opens a backend over a copy of a native snapshot's files.
func openNative(t *testing.T, n *state.NativeSnapshot, dir string, r state.KeyGroupRange) *state.LSMBackend[string] {
	t.Helper()
	st := openCopy(t, n, dir)
	b, err := state.OpenLSMBackend(st, keySer, maxPar, r)
	if err != nil {
		st.Close()
		t.Fatalf("OpenLSMBackend: %v", err)
	}
	return b
}

func sstFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sst") {
			out = append(out, e.Name())
		}
	}
	return out
}

func mustGone(t *testing.T, what, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s %s is still there (%v)", what, dir, err)
	}
}

func mustExist(t *testing.T, what, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("%s %s: %v", what, dir, err)
	}
}

func dispose(t *testing.T, b state.Backend[string]) {
	t.Helper()
	if err := b.Dispose(); err != nil {
		t.Errorf("Dispose: %v", err)
	}
}

// scribble writes every kind of state for keys, other than populate does.
func scribble(h *handles, keys []string, round int) {
	for i, k := range keys {
		h.b.SetCurrentKey(k)
		h.v.Update(int64(-1 - i - round))
		h.l.Add(fmt.Sprint("after-", round))
		h.m.Put("after", int64(round))
		h.m.Remove(userKeys[i%len(userKeys)])
		h.tq[0].Register(int64(10_000 + round))
		h.tq[0].Delete(int64(i%200) - 60)
		h.tq[1].Register(int64(-10_000 - round))
		if i%9 == 0 {
			h.l.Clear()
			h.m.Clear()
			h.v.Clear()
		}
	}
}

func TestNativeRoundTrip(t *testing.T) {
	base := t.TempDir()
	keys := manyKeys()
	lb, _ := openLSM(t, filepath.Join(base, "db"), fullRange)
	defer dispose(t, lb)
	l := declare(t, lb)
	h := declare(t, state.NewKeyedBackend(keySer, maxPar, fullRange))
	populate(l, keys)
	populate(h, keys)
	// Fired timers (deleted from the store) and their callbacks' writes
	// are part of the snapshot too.
	var lf, hf []fired
	if err := l.tq[0].FireDue(20, fireCallback(l, 0, &lf)); err != nil {
		t.Fatal(err)
	}
	if err := h.tq[0].FireDue(20, fireCallback(h, 0, &hf)); err != nil {
		t.Fatal(err)
	}
	sameFirings(t, hf, lf)

	want := takeBlocks(t, lb) // the same logical moment as the native snapshot
	sameBlocks(t, "lsm vs hashmap before the native snapshot", want, takeBlocks(t, h.b))
	snapDir := filepath.Join(base, "snap")
	snap := takeNative(t, lb, 1, snapDir, false)
	// Written before the files are: none of it may be in them (enough
	// writes to flush the store's write buffer several times meanwhile).
	scribble(l, keys, 1)
	scribble(l, []string{"new-1", "new-2", "new-3"}, 2)
	waitNative(t, snap)
	if snap.BackendID == "" {
		t.Fatal("native snapshot without a backend id")
	}
	if _, ok := snap.Shared(sstFiles(t, snap.Dir)[0]); ok {
		t.Fatal("a non-incremental snapshot shares a file")
	}

	rb := openNative(t, snap, filepath.Join(base, "restored"), fullRange)
	defer dispose(t, rb)
	// Before any operator declares them, the states are known from the
	// files.
	names := map[string]bool{}
	for _, s := range rb.States() {
		names[s.Name] = true
	}
	for _, n := range []string{valueName, listName, mapName, state.ProcessingTimersName, state.EventTimersName} {
		if !names[n] {
			t.Fatalf("restored state %q is not listed: %v", n, rb.States())
		}
	}
	// Undeclared, they snapshot as they were.
	sameBlocks(t, "native restore, undeclared", takeBlocks(t, rb), want)

	r := declare(t, rb)
	sameStates(t, h.b, rb)
	sameBlocks(t, "native restore, declared", takeBlocks(t, rb), want)
	compareReads(t, h, r, append(slices.Clone(keys), "new-1", "new-3"))

	// The original went on with its writes.
	l.b.SetCurrentKey("new-2")
	if v, ok := l.v.Value(); !ok || v != -1-1-2 {
		t.Fatalf("the original lost a write made during its snapshot: %d, %v", v, ok)
	}

	// The restored backend works on: its timers fire, and it takes
	// snapshots of both kinds.
	fireAll(t, h, r)
	scribble(h, keys[:50], 3)
	scribble(r, keys[:50], 3)
	after := takeBlocks(t, h.b)
	sameBlocks(t, "native restore after writes", takeBlocks(t, rb), after)
	snap2 := takeNative(t, rb, 2, filepath.Join(base, "snap2"), false)
	waitNative(t, snap2)
	rb2 := openNative(t, snap2, filepath.Join(base, "restored2"), fullRange)
	defer dispose(t, rb2)
	snap2.Release()
	sameBlocks(t, "native restore of a native restore", takeBlocks(t, rb2), after)

	// Release removes the snapshot's local directory, and only that.
	mustExist(t, "snapshot directory before Release", snapDir)
	snap.Release()
	mustGone(t, "snapshot directory after Release", snapDir)
	mustExist(t, "working directory", filepath.Join(base, "db"))
	snap.Release() // idempotent
}

// Canonical state restored into the LSM but not declared when a native
// snapshot is taken (kept as raw payloads in the store) survives a native
// restore.
func TestNativeRoundTripUndeclared(t *testing.T) {
	base := t.TempDir()
	keys := manyKeys()
	want := legacySource(t, keys)
	lb, _ := openLSM(t, filepath.Join(base, "db"), fullRange)
	defer dispose(t, lb)
	if err := lb.RestoreKeyGroups(want, 1); err != nil {
		t.Fatal(err)
	}
	declare(t, lb) // not legacy
	sameBlocks(t, "canonical restore", takeBlocks(t, lb), want)

	snap := takeNative(t, lb, 1, filepath.Join(base, "snap"), false)
	defer snap.Release()
	waitNative(t, snap)
	rb := openNative(t, snap, filepath.Join(base, "restored"), fullRange)
	defer dispose(t, rb)
	if !slices.ContainsFunc(rb.States(), func(s state.StateInfo) bool { return s.Name == legacyName && s.Kind == state.KindValue }) {
		t.Fatalf("undeclared state not listed after a native restore: %v", rb.States())
	}
	declare(t, rb)
	sameBlocks(t, "native restore with undeclared state", takeBlocks(t, rb), want)

	legacy, err := state.GetValueState[string](rb, legacyName, state.SerializerFor[string]())
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		rb.SetCurrentKey(k)
		v, ok := legacy.Value()
		if wantOK := i%2 == 0; ok != wantOK || (ok && v != "old-"+k) {
			t.Fatalf("key %q: legacy state %q,%v after a native restore", k, v, ok)
		}
	}
	sameBlocks(t, "native restore, legacy declared", takeBlocks(t, rb), want)
}

// copiedBackend is a new backend over r with the key groups of the native
// snapshots' files copied in (rescaling), its states declared after.
func copiedBackend(t *testing.T, base string, r state.KeyGroupRange, snaps ...*state.NativeSnapshot) *state.LSMBackend[string] {
	t.Helper()
	st, err := lsm.Open(lsm.Options{Dir: filepath.Join(base, fmt.Sprintf("db-%d-%d", r.Start, r.End)), BlockCacheSize: 1 << 20, WriteBufferSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b := state.NewLSMBackend(st, keySer, maxPar, r)
	for i, n := range snaps {
		src := openCopy(t, n, filepath.Join(base, fmt.Sprintf("src-%d-%d-%d", r.Start, r.End, i)))
		err := b.CopyKeyGroups(src)
		if cerr := src.Close(); cerr != nil {
			t.Errorf("closing the source store: %v", cerr)
		}
		if err != nil {
			dispose(t, b)
			t.Fatalf("CopyKeyGroups into %v: %v", r, err)
		}
	}
	return b
}

func TestNativeRescaleOut(t *testing.T) {
	base := t.TempDir()
	keys := manyKeys()
	lb, _ := openLSM(t, filepath.Join(base, "db"), fullRange)
	defer dispose(t, lb)
	// Restored from canonical blocks with a state that is never declared
	// (kept raw in the store), then written to.
	if err := lb.RestoreKeyGroups(legacySource(t, keys), 1); err != nil {
		t.Fatal(err)
	}
	l := declare(t, lb)
	scribble(l, keys[:100], 0)
	want := takeBlocks(t, lb)
	snap := takeNative(t, lb, 1, filepath.Join(base, "snap"), true)
	defer snap.Release()
	scribble(l, keys, 1) // not in the snapshot
	waitNative(t, snap)

	for i := range 2 {
		r := state.RangeForSubtask(maxPar, 2, i)
		t.Run(fmt.Sprint(r), func(t *testing.T) {
			b := copiedBackend(t, base, r, snap)
			defer dispose(t, b)
			blocks := want[r.Start : r.End+1]
			sameBlocks(t, "copied, undeclared", takeBlocks(t, b), blocks)
			n := declare(t, b)
			sameBlocks(t, "copied, declared", takeBlocks(t, b), blocks)

			h := restoreInto(t, state.NewKeyedBackend(keySer, maxPar, r), blocks, 1, true)
			compareReads(t, h, n, inRange(keys, r))
			for _, x := range []state.Backend[string]{h.b, b} {
				if !slices.ContainsFunc(x.States(), func(s state.StateInfo) bool { return s.Name == legacyName }) {
					t.Fatalf("%T: undeclared %q not listed: %v", x, legacyName, x.States())
				}
			}
			fireAll(t, h, n)
			scribble(h, inRange(keys, r), 2)
			scribble(n, inRange(keys, r), 2)
			sameBlocks(t, "copied, after writes", takeBlocks(t, b), takeBlocks(t, h.b))
			var legacies []state.ValueState[string]
			for _, x := range []state.Backend[string]{h.b, b} {
				v, err := state.GetValueState[string](x, legacyName, state.SerializerFor[string]())
				if err != nil {
					t.Fatalf("%T: %v", x, err)
				}
				legacies = append(legacies, v)
			}
			got := 0
			for _, k := range inRange(keys, r) {
				h.b.SetCurrentKey(k)
				b.SetCurrentKey(k)
				hv, hok := legacies[0].Value()
				lv, lok := legacies[1].Value()
				if hv != lv || hok != lok {
					t.Fatalf("key %q: %q %q,%v on hashmap, %q,%v copied", k, legacyName, hv, hok, lv, lok)
				}
				if lok {
					got++
				}
			}
			if got == 0 {
				t.Fatalf("no key has %q", legacyName)
			}
			sameBlocks(t, "copied, legacy declared", takeBlocks(t, b), takeBlocks(t, h.b))
		})
	}
}

const onlyLeftName = "only-left"

func TestNativeRescaleIn(t *testing.T) {
	base := t.TempDir()
	keys := manyKeys()
	var want []state.KeyGroupBlock
	var snaps []*state.NativeSnapshot
	for i := range 2 {
		r := state.RangeForSubtask(maxPar, 2, i)
		lb, _ := openLSM(t, filepath.Join(base, fmt.Sprint("db-", i)), r)
		defer dispose(t, lb)
		var l *handles
		if i == 0 {
			l = declare(t, lb)
			// Declared by this old subtask only (an operator that
			// declares state lazily).
			only, err := state.GetMapState[string, int64](lb, onlyLeftName, state.SerializerFor[string](), state.SerializerFor[int64]())
			if err != nil {
				t.Fatal(err)
			}
			for j, k := range inRange(keys, r) {
				if j%3 == 0 {
					lb.SetCurrentKey(k)
					only.Put(k, int64(j))
				}
			}
		} else {
			// Declared in another order: the ids differ between the two
			// old stores.
			if _, err := state.TimersFor(lb, state.KindEventTime); err != nil {
				t.Fatal(err)
			}
			if _, err := state.GetListState[string](lb, listName, state.SerializerFor[string]()); err != nil {
				t.Fatal(err)
			}
			l = declare(t, lb)
		}
		populate(l, inRange(keys, r))
		want = append(want, takeBlocks(t, lb)...)
		snap := takeNative(t, lb, 7, filepath.Join(base, fmt.Sprint("snap-", i)), false)
		defer snap.Release()
		scribble(l, inRange(keys, r), 1) // not in the snapshot
		waitNative(t, snap)
		snaps = append(snaps, snap)
	}
	if len(want) != fullRange.Len() {
		t.Fatalf("%d blocks", len(want))
	}
	withOnly := 0
	for _, b := range want {
		if _, ok := parseBlock(t, b.Block)[onlyLeftName]; ok {
			withOnly++
		}
	}
	if withOnly == 0 {
		t.Fatalf("no key group has %q", onlyLeftName)
	}

	b := copiedBackend(t, base, fullRange, snaps...)
	defer dispose(t, b)
	if !slices.ContainsFunc(b.States(), func(s state.StateInfo) bool { return s.Name == onlyLeftName && s.Kind == state.KindMap }) {
		t.Fatalf("%q not listed after the merge: %v", onlyLeftName, b.States())
	}
	sameBlocks(t, "merged, undeclared", takeBlocks(t, b), want)
	n := declare(t, b)
	sameBlocks(t, "merged, declared", takeBlocks(t, b), want)

	h := restoreInto(t, state.NewKeyedBackend(keySer, maxPar, fullRange), want, 1, true)
	compareReads(t, h, n, keys)
	for _, x := range []state.Backend[string]{h.b, b} {
		only, err := state.GetMapState[string, int64](x, onlyLeftName, state.SerializerFor[string](), state.SerializerFor[int64]())
		if err != nil {
			t.Fatalf("%T: %v", x, err)
		}
		x.SetCurrentKey(inRange(keys, state.RangeForSubtask(maxPar, 2, 0))[0])
		if v, ok := only.Get(x.CurrentKey()); !ok || v != 0 {
			t.Fatalf("%T: %q of %q = %d, %v", x, onlyLeftName, x.CurrentKey(), v, ok)
		}
		only.Put("more", 1)
	}
	fireAll(t, h, n)
	sameBlocks(t, "merged, after writes", takeBlocks(t, b), takeBlocks(t, h.b))
}

// Pebble compacts on goroutines of its own, so that which files of one
// snapshot are still in the next is not determined: the checks hold for
// whatever files there are, and a run in which a compaction left nothing
// to check (rare) is repeated.
func TestNativeIncremental(t *testing.T) {
	for attempt := range 10 {
		if incrementalRun(t, filepath.Join(t.TempDir(), fmt.Sprint(attempt))) {
			return
		}
		t.Logf("attempt %d: compactions left nothing to check; again", attempt)
	}
	t.Fatal("every attempt was vacuous")
}

// incrementalRun reports whether every check had files to check.
func incrementalRun(t *testing.T, base string) bool {
	t.Helper()
	// A write buffer as large as the default: the only Pebble flushes are
	// the snapshots' own, one small SST file each.
	st, err := lsm.Open(lsm.Options{Dir: filepath.Join(base, "db"), BlockCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	lb := state.NewLSMBackend(st, keySer, maxPar, fullRange)
	defer dispose(t, lb)
	l := declare(t, lb)
	keys := manyKeys()
	populate(l, keys)
	touch := func(ks []string, v int64) {
		for _, k := range ks {
			lb.SetCurrentKey(k)
			l.v.Update(v)
		}
	}
	take := func(id int64, incremental bool) *state.NativeSnapshot {
		n := takeNative(t, lb, id, filepath.Join(base, fmt.Sprint("chk-", id)), incremental)
		waitNative(t, n)
		return n
	}
	// upload records where every SST file of n is "uploaded", and a
	// checksum of the prefix and the name (carried, not recomputed).
	upload := func(n *state.NativeSnapshot, prefix string) map[string]savepoint.NativeFile {
		m := map[string]savepoint.NativeFile{}
		for i, f := range sstFiles(t, n.Dir) {
			m[f] = savepoint.NativeFile{Name: f, Path: "../shared/" + prefix + f, CRC32C: fmt.Sprintf("%02x%06x", prefix[0], i)}
		}
		n.Uploaded(m)
		return m
	}
	// checkShared: the files of n that the last completed checkpoint
	// uploaded (conf) are shared where it put them, the others are not;
	// it returns how many of each.
	checkShared := func(what string, n *state.NativeSnapshot, conf map[string]savepoint.NativeFile) (shared, added int) {
		t.Helper()
		for _, f := range sstFiles(t, n.Dir) {
			p, ok := n.Shared(f)
			want, wantOK := conf[f]
			if ok != wantOK || p != want {
				t.Fatalf("%s: Shared(%s) = %+v, %v; want %+v, %v", what, f, p, ok, want, wantOK)
			}
			if ok {
				shared++
			} else {
				added++
			}
		}
		return shared, added
	}
	full := true // every check had something to check

	s1 := take(1, true)
	checkShared("snapshot 1, no checkpoint completed", s1, nil)
	up1 := upload(s1, "x-")
	s1.Release()
	lb.CheckpointComplete(1)

	touch(keys[:5], 1)
	s2 := take(2, true)
	sh, add := checkShared("snapshot 2, after 1 completed", s2, up1)
	if add == 0 {
		t.Fatalf("snapshot 2 has no new file after writes: %v", sstFiles(t, s2.Dir))
	}
	full = full && sh > 0
	s2.Release()
	lb.CheckpointAborted(2) // nothing uploaded: nothing to forget

	// A non-incremental snapshot shares nothing.
	s3 := take(3, false)
	checkShared("snapshot 3, not incremental", s3, nil)
	s3.Release()

	// Checkpoint 4 is uploaded, then aborted: the next snapshot refers to
	// checkpoint 1's uploads only, not to 4's.
	touch(keys[5:10], 2)
	s4 := take(4, true)
	checkShared("snapshot 4", s4, up1)
	up4 := upload(s4, "y-")
	s4.Release()
	lb.CheckpointAborted(4)

	s5 := take(5, true) // nothing written since 4
	checkShared("snapshot 5, after 4 aborted", s5, up1)
	full = full && slices.ContainsFunc(sstFiles(t, s5.Dir), func(f string) bool {
		_, in1 := up1[f]
		_, in4 := up4[f]
		return in4 && !in1
	})
	up5 := upload(s5, "z-")
	s5.Release()
	// A late notification of the aborted checkpoint changes nothing.
	lb.CheckpointComplete(4)
	s6 := take(6, true)
	checkShared("snapshot 6, after a late complete of 4", s6, up1)
	s6.Release()

	// Checkpoint 5 completes: its uploads replace checkpoint 1's.
	lb.CheckpointComplete(5)
	s7 := take(7, true)
	sh, _ = checkShared("snapshot 7, after 5 completed", s7, up5)
	full = full && sh > 0
	s7.Release()

	// A full checkpoint of the incremental backend refers to nothing, and
	// uploads its files for the checkpoints after it: once it completes,
	// the next refers to them.
	s8 := takeFull(t, lb, 8, filepath.Join(base, "chk-8"))
	waitNative(t, s8)
	checkShared("snapshot 8, full", s8, nil)
	up8 := upload(s8, "f-")
	s8.Release()
	lb.CheckpointComplete(8)
	s9 := take(9, true)
	sh, _ = checkShared("snapshot 9, after the full 8 completed", s9, up8)
	full = full && sh > 0
	s9.Release()
	return full
}

// takeFull takes the native snapshot of a full checkpoint of an
// incremental backend (checkpoint --full).
func takeFull(t *testing.T, b state.Backend[string], id int64, dir string) *state.NativeSnapshot {
	t.Helper()
	n := takeNativeWith(t, b, state.SnapshotOptions{ID: id, LocalDir: dir, Incremental: true, Full: true})
	if !n.Incremental {
		t.Fatalf("a full checkpoint's snapshot of an incremental backend does not share its files")
	}
	return n
}

func TestNativeDisposeWhileOpen(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "db")
	keys := manyKeys()
	lb, _ := openLSM(t, dir, fullRange)
	l := declare(t, lb)
	populate(l, keys)
	want := takeBlocks(t, lb)
	snapDir := filepath.Join(base, "snap")
	snap := takeNative(t, lb, 1, snapDir, true)
	scribble(l, keys, 1) // the task goes on until it is cancelled

	if err := lb.Dispose(); err != nil {
		t.Fatalf("Dispose with a native snapshot open: %v", err)
	}
	mustExist(t, "working directory after Dispose, under an open native snapshot", dir)
	for _, o := range []state.SnapshotOptions{{}, {ID: 2, Native: true, LocalDir: filepath.Join(base, "snap2"), RemoveDir: os.RemoveAll}} {
		if s, err := lb.TakeSnapshot(o); err == nil {
			s.Release()
			t.Fatalf("TakeSnapshot(%+v) after Dispose succeeded", o)
		}
	}
	mustGone(t, "directory of a snapshot refused", filepath.Join(base, "snap2"))

	// The files are written all the same, and whole.
	waitNative(t, snap)
	mustExist(t, "working directory after the snapshot's files are written", dir)
	rb := openNative(t, snap, filepath.Join(base, "restored"), fullRange)
	defer dispose(t, rb)
	declare(t, rb)
	sameBlocks(t, "native snapshot of a disposed backend", takeBlocks(t, rb), want)

	snap.Release()
	mustGone(t, "snapshot directory after Release", snapDir)
	mustGone(t, "working directory after Dispose and the last Release", dir)
	snap.Release()
	if err := lb.Dispose(); err != nil {
		t.Fatalf("second Dispose: %v", err)
	}
}
