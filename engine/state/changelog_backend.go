package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/changelog"
)

// ChangelogBackend is Flink's changelog state backend: it wraps a hashmap
// or LSM backend, applies every change to it and also appends the change
// to the subtask's state changelog, which a persister writes to files
// continuously. Now and then (state.changelog.periodic-materialize.
// interval) the wrapped backend's state is materialized — snapshotted
// and written to checkpoint storage on another goroutine, independently of
// checkpoints — and the log before it is no longer needed. A checkpoint
// then costs only the log's tail: it ends the current log file and refers
// to the latest materialization plus the log files written since.
//
//	wrapped state  ──materialize every interval──▶  shared/<id>-mat-<n>.state
//	   ▲ every change                                      │ + log since
//	   └──────────── log: dstl/<id>-<seq>.log ─────────────┘ = checkpoint
//
// Restore loads the materialization (canonical blocks, into either
// backend), then replays the log filtered by key group, so it works at any
// parallelism. The log's records are first indexed by key group
// (changelog.Index) and replayed one key group after the other, in log
// order within each: a key group's maps stay in the cache for all its
// records, and on hashmap (every state and the timers) key groups replay on
// every core.
// Records of a state are replayed when the state is registered (only then
// are its serializers known).
type ChangelogBackend[K comparable] struct {
	inner  Backend[K]
	hashed HashedKeys[K] // inner, if it takes a key's hash
	// kb is inner when it is the hashmap. The records then take the
	// current key from it (current), so that a task may set its key there
	// directly (KeysDirect), without this wrapper's call around it.
	kb     *KeyedBackend[K]
	keySer KeySerializer[K]
	o      ChangelogOptions
	w      *changelog.Writer // nil: replay only (changelog off in this run)

	cur    K // the current key and key group, when kb is nil
	kg     int
	keyBuf []byte // the current key serialized (keys other than strings)
	keyOK  bool
	strKey bool // string keys with the built-in serializer: written directly

	states map[string]*clDecl
	nextID uint32

	// the restored log's records, until every state in them is registered
	index    *changelog.Index
	inLog    map[string]*clDecl // states the restored log has records of
	replayed map[string]bool

	// materialization: the latest completed one, the one running, and
	// failures in a row.
	mat       materialization
	run       *matRun
	nextMat   time.Time
	failures  int
	forced    bool      // restored: materialize before the first checkpoint
	dirty     bool      // changes since the last materialization began
	matSeq    int64     // materialization ids
	lastCkpt  int64     // the file the previous checkpoint ended
	completed time.Time // when the latest checkpoint completed
	lastStart time.Time // when the latest materialization started
	lastMatID int64     // the materialization the previous checkpoint used
	disposed  bool
}

// ChangelogOptions configure one subtask's changelog backend.
type ChangelogOptions struct {
	// Logging: record changes. Off, the backend only replays a restored
	// log (changelog disabled on restore) and adds nothing per access.
	Logging bool
	Writer  changelog.WriterOptions // Declarations is set by the backend
	// Materialize writes a snapshot of the wrapped backend into checkpoint
	// storage, returning the handle of its blocks and its size; it runs
	// on a goroutine of its own.
	Materialize func(s Snapshot, id int64) (*savepoint.KeyedStateHandle, int64, error)
	// MaterializeOptions, when set, says how the wrapped backend takes a
	// materialization's snapshot (the LSM: natively, incrementally, into
	// a local directory); otherwise it is canonical blocks. Its ID is the
	// materialization's, negated: the wrapped backend's upload bookkeeping
	// keeps materializations apart from checkpoints.
	MaterializeOptions func(id int64) SnapshotOptions
	// Interval between materializations; 0: only when forced.
	Interval time.Duration
	// CheckpointPeriod is how often checkpoints come (the checkpoint
	// interval, or the minimum pause if longer). With it set, a periodic
	// materialization starts right after a checkpoint completes — the
	// first from half a period before it is due — or, if none completes,
	// a period and a half after it is due (startsNow); 0: when due. Why:
	// started on the interval's own clock, a materialization fell on a
	// checkpoint as often as not (10 min is a multiple of any round
	// checkpoint interval), and that checkpoint's log roll then waited
	// behind the materialization's roll and its file's writes — 18–22 ms
	// against 3–7 ms for the others at 1 M keys, the whole of the
	// changelog's p99. Right after a checkpoint, it has the period to
	// itself.
	CheckpointPeriod time.Duration
	MaxFailures      int
	Now              func() time.Time
	// OnMaterialized is told of each materialization (for the log).
	OnMaterialized func(id int64, size int64, took time.Duration, err error)
}

// RestoredLog is one old subtask's log files to replay.
type RestoredLog struct {
	Files []RestoredFile
}

// RestoredFile is one log file's bytes and the size its checkpoint
// recorded.
type RestoredFile struct {
	Name string
	Data []byte
	Read func(buf *[]byte) ([]byte, error) // instead of Data: read while indexing, on every core, into a worker's buffer (changelog.ReadFileInto)
	Size int64
	// CRC32C is the checksum the checkpoint recorded of the first Size
	// bytes, if HasCRC (changelog.Contents).
	CRC32C uint32
	HasCRC bool
}

type clDecl struct {
	id   uint32
	kind Kind
	name string
	// wrapped: a value state handed out wrapped (clValueState), so
	// never also logging its own changes (getChangelogValueState).
	wrapped bool
}

type materialization struct {
	id     int64
	base   int64 // the first log file after it
	handle *savepoint.KeyedStateHandle
	size   int64
}

type matRun struct {
	m     materialization
	start time.Time
	done  chan struct{}
	err   error
}

// NewChangelogBackend wraps inner. With logging on, the log's files are
// numbered from 1.
func NewChangelogBackend[K comparable](inner Backend[K], keySer KeySerializer[K], o ChangelogOptions) *ChangelogBackend[K] {
	b := &ChangelogBackend[K]{inner: inner, keySer: keySer, o: o, states: map[string]*clDecl{},
		inLog: map[string]*clDecl{}, replayed: map[string]bool{}}
	b.hashed, _ = inner.(HashedKeys[K])
	b.kb, _ = inner.(*KeyedBackend[K])
	_, b.strKey = any(keySer).(stringSerializer)
	if o.Now == nil {
		b.o.Now = time.Now
	}
	if o.Logging {
		wo := o.Writer
		wo.Declarations = b.declarations
		if wo.Now == nil {
			wo.Now = b.o.Now
		}
		now := b.o.Now()
		b.w = changelog.NewWriter(wo, 1, now)
		b.mat.base = 1 // no materialization yet: the whole log counts
		if o.Interval > 0 {
			b.nextMat = now.Add(o.Interval)
		}
	}
	return b
}

// Inner is the wrapped backend.
func (b *ChangelogBackend[K]) Inner() Backend[K] { return b.inner }

func (b *ChangelogBackend[K]) declarations(dst []byte) []byte {
	ds := make([]*clDecl, 0, len(b.states))
	for _, d := range b.states {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(x, y *clDecl) int { return int(x.id) - int(y.id) })
	for _, d := range ds {
		dst = changelog.AppendDeclare(dst, d.id, byte(d.kind), d.name)
	}
	return dst
}

// logDecl gives a state its log id.
func (b *ChangelogBackend[K]) logDecl(name string, kind Kind) *clDecl {
	if d, ok := b.states[name]; ok {
		return d
	}
	b.nextID++
	d := &clDecl{id: b.nextID, kind: kind, name: name}
	b.states[name] = d
	if b.w != nil {
		b.w.Declare(d.id, byte(kind), name)
	}
	return d
}

func (b *ChangelogBackend[K]) KeyGroupRange() KeyGroupRange { return b.inner.KeyGroupRange() }
func (b *ChangelogBackend[K]) MaxParallelism() int          { return b.inner.MaxParallelism() }
func (b *ChangelogBackend[K]) KeyGroupOf(k K) int           { return b.inner.KeyGroupOf(k) }

// CurrentKey is the wrapped backend's: a timer firing sets it there (its
// queue is the wrapped backend's when the changelog is off).
func (b *ChangelogBackend[K]) CurrentKey() K { return b.inner.CurrentKey() }

func (b *ChangelogBackend[K]) SetCurrentKey(k K) { b.SetCurrentKeyAndGroup(k, b.inner.KeyGroupOf(k)) }

func (b *ChangelogBackend[K]) SetCurrentKeyAndGroup(k K, kg int) {
	b.inner.SetCurrentKeyAndGroup(k, kg)
	b.cur, b.kg, b.keyOK = k, kg, false
}

// SetCurrentKeyHashed passes the key's hash on to a wrapped hashmap
// backend (KeyedBackend.SetCurrentKeyHashed).
func (b *ChangelogBackend[K]) SetCurrentKeyHashed(k K, kg int, hash uint32) {
	if b.hashed != nil {
		b.hashed.SetCurrentKeyHashed(k, kg, hash)
	} else {
		b.inner.SetCurrentKeyAndGroup(k, kg)
	}
	b.cur, b.kg, b.keyOK = k, kg, false
}

// KeysDirect is where a task sets each record's key: the wrapped hashmap
// itself, whose current key the records read, or nil (set it here). At
// full speed this wrapper's call around the hashmap's cost a word count
// ~3 ns a record, ~3% of its throughput.
func (b *ChangelogBackend[K]) KeysDirect() HashedKeys[K] {
	if b.kb == nil {
		return nil
	}
	return b.kb
}

// current is the current key and its key group.
func (b *ChangelogBackend[K]) current() (K, int) {
	if kb := b.kb; kb != nil {
		return kb.currentKey, kb.kgRange.Start + kb.kgIndex
	}
	return b.cur, b.kg
}

// syncKey takes the wrapped backend's current key (set by a timer firing);
// over the hashmap the records read it there anyway (current).
func (b *ChangelogBackend[K]) syncKey() {
	if b.kb != nil {
		return
	}
	k := b.inner.CurrentKey()
	b.cur, b.kg, b.keyOK = k, b.inner.KeyGroupOf(k), false
}

// head starts a record about the current key.
func (b *ChangelogBackend[K]) head(op changelog.Op, d *clDecl) *changelog.Writer {
	b.dirty = true
	k, kg := b.current()
	if b.strKey {
		b.w.HeadString(op, d.id, kg, asString(k))
		return b.w
	}
	if !b.keyOK || b.kb != nil {
		// Cached only while this wrapper sets the key (keyOK is reset
		// there); a key set on the hashmap directly is serialized anew
		// (comparing keys would take +0 and -0 for one).
		b.keyBuf = b.keySer.Append(b.keyBuf[:0], k)
		b.keyOK = true
	}
	b.w.Head(op, d.id, kg, b.keyBuf)
	return b.w
}

// States lists the wrapped backend's states and those only the restored
// log has.
func (b *ChangelogBackend[K]) States() []StateInfo {
	out := b.inner.States()
	for name, d := range b.inLog {
		if b.replayed[name] || slices.ContainsFunc(out, func(s StateInfo) bool { return s.Name == name }) {
			continue
		}
		out = append(out, StateInfo{Name: name, Kind: d.kind, Type: "(in the changelog)"})
	}
	return out
}

// RestoreKeyGroups loads a materialization's (or any canonical
// snapshot's) blocks into the wrapped backend.
func (b *ChangelogBackend[K]) RestoreKeyGroups(blocks []KeyGroupBlock, workers int) error {
	b.restored()
	return b.inner.RestoreKeyGroups(blocks, workers)
}

// RestoreChangelog takes the log files to replay and indexes their records
// by key group, checking every record now, so a corrupt log fails the
// restore before the job runs. With logging on, the restored state is
// materialized before the first checkpoint: no checkpoint of this job
// refers to the restored snapshot.
func (b *ChangelogBackend[K]) RestoreChangelog(logs []RestoredLog) error {
	if b.index == nil {
		kgr := b.inner.KeyGroupRange()
		b.index = changelog.NewIndex(kgr.Start, kgr.End)
	}
	var files []changelog.Contents
	for _, l := range logs {
		for _, f := range l.Files {
			files = append(files, changelog.Contents{Name: f.Name, Data: f.Data, Read: f.Read, Size: f.Size, CRC32C: f.CRC32C, HasCRC: f.HasCRC})
		}
	}
	if err := b.index.Add(files, runtime.GOMAXPROCS(0)); err != nil {
		return err
	}
	var err error
	b.index.States(func(name string, kind byte) {
		if d, ok := b.inLog[name]; ok && d.kind != Kind(kind) {
			err = errors.Join(err, fmt.Errorf("state %q is both %s and %s state in the changelog: %w", name, d.kind, Kind(kind), changelog.ErrCorrupt))
		}
		b.inLog[name] = &clDecl{kind: Kind(kind), name: name}
	})
	if err != nil {
		return err
	}
	b.restored()
	return nil
}

// restoredFirst readies a state's registration on the hashmap: when the
// state has both restored key groups and log records, the key groups are
// taken from the wrapped backend before it registers the state, and the
// returned hook decodes each one right before its records replay, while
// its maps are still in the cache (decoding every key group and then
// replaying every key group found each map evicted again at 1 M keys).
// Once the state is registered, hook(state) is replayKeyGroups' first.
func (b *ChangelogBackend[K]) restoredFirst(name string, kind Kind) (hook func(st any) func(kgi int) error, err error) {
	none := func(any) func(int) error { return nil }
	kb, ok := b.inner.(*KeyedBackend[K])
	if d, logged := b.inLog[name]; !ok || !logged || b.replayed[name] || d.kind != kind {
		return none, nil
	}
	raw, err := kb.takePending(name, kind)
	if err != nil || raw == nil {
		return none, err
	}
	return func(st any) func(int) error {
		s := st.(keyedState)
		return func(kgi int) error { return restoreRaw(kb, name, s, raw, kgi) }
	}, nil
}

// replayKeyGroups applies the restored log's records of one state key group
// by key group, in log order within each, on up to workers goroutines
// (apply must then be safe for distinct key groups at once). apply gets
// the key group's index in the range.
func (b *ChangelogBackend[K]) replayKeyGroups(name string, kind Kind, workers int, first func(kgi int) error, apply func(kgi int, k K, r *changelog.Record) error) error {
	d, ok := b.inLog[name]
	if !ok || b.replayed[name] {
		return nil
	}
	if d.kind != kind {
		return fmt.Errorf("state %q was restored as %s state but is now declared as %s state", name, d.kind, kind)
	}
	kgr := b.inner.KeyGroupRange()
	decode := b.keySer.Decode
	if kb, ok := b.inner.(*KeyedBackend[K]); ok && kb.strKeys && kind != KindProcessingTime && kind != KindEventTime {
		// A value, list or map state of the hashmap backend copies a
		// string key's bytes into its table, so the key can be read in
		// place from the index, which never changes its bytes: a string
		// allocated per record was a fifth of a recovery's CPU at 1 M
		// keys. (Timers keep their keys as strings: those are copied.)
		decode = func(src []byte) (K, []byte, error) {
			p, rest, err := readBytes(src)
			if err != nil || len(p) == 0 {
				return fromString[K](""), rest, err
			}
			return fromString[K](unsafe.String(&p[0], len(p))), rest, err
		}
	}
	err := inParallel(kgr.End-kgr.Start+1, workers, func(i int) error {
		if first != nil {
			if err := first(i); err != nil {
				return err
			}
		}
		kg := kgr.Start + i
		return b.index.KeyGroup(kg, func(r *changelog.Record) error {
			if r.State != name {
				return nil
			}
			k, _, err := decode(r.Key)
			if err != nil {
				return fmt.Errorf("replay state %q: key: %w", name, err)
			}
			if err := apply(i, k, r); err != nil {
				return fmt.Errorf("replay state %q: %w", name, err)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	b.replayed[name] = true
	if len(b.replayed) == len(b.inLog) {
		b.index = nil // every state has its records
	}
	return nil
}

// carryPending re-logs the restored records of states not registered yet
// after a materialization's boundary: the materialization cannot hold them
// (their serializers are unknown), so the log keeps them.
func (b *ChangelogBackend[K]) carryPending() error {
	if b.index == nil {
		return nil
	}
	kgr := b.inner.KeyGroupRange()
	for kg := kgr.Start; kg <= kgr.End; kg++ {
		err := b.index.KeyGroup(kg, func(r *changelog.Record) error {
			if b.replayed[r.State] {
				return nil
			}
			d := b.logDecl(r.State, Kind(r.Kind))
			b.w.Head(r.Op, d.id, r.KeyGroup, r.Key)
			switch r.Op {
			case changelog.OpSet, changelog.OpListAdd, changelog.OpListSet, changelog.OpMapRemove:
				b.w.Buf = changelog.AppendPrefixed(b.w.Buf, r.A)
			case changelog.OpMapPut:
				b.w.Buf = changelog.AppendPrefixed(changelog.AppendPrefixed(b.w.Buf, r.A), r.B)
			case changelog.OpTimerAdd, changelog.OpTimerDel:
				b.w.Buf = binary.AppendVarint(b.w.Buf, r.Time)
			}
			b.w.Done()
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// TakeSnapshot: a checkpoint with the changelog on ends the current log
// file and refers to the latest materialization and the files since;
// savepoints, full checkpoints and replay-only backends take the wrapped
// backend's own snapshot.
func (b *ChangelogBackend[K]) TakeSnapshot(o SnapshotOptions) (Snapshot, error) {
	if b.w == nil || !o.Changelog {
		return b.inner.TakeSnapshot(o)
	}
	if err := b.collect(b.o.Now()); err != nil {
		return nil, err
	}
	b.checkLog(b.o.Now())
	if b.forced && b.run == nil {
		// The first checkpoint after a restore refers to a new
		// materialization, never to the restored snapshot.
		if err := b.Materialize(); err != nil {
			return nil, err
		}
	}
	to := b.w.Roll()
	s := &ChangelogSnapshot{kgr: b.inner.KeyGroupRange(), w: b.w, to: to, prevCkpt: b.lastCkpt, prevMat: b.lastMatID}
	if b.forced {
		s.run = b.run // completes (or fails) the checkpoint's wait
	} else {
		s.mat = b.mat
	}
	b.lastCkpt = to
	return s, nil
}

// ChangelogSnapshot is a checkpoint of a changelog backend: the
// materialization it refers to and the log files up to its boundary.
type ChangelogSnapshot struct {
	kgr      KeyGroupRange
	w        *changelog.Writer
	mat      materialization
	run      *matRun // a materialization still running, when forced
	to       int64
	prevCkpt int64
	prevMat  int64
	released bool
}

// ChangelogState is a changelog checkpoint's keyed state, once written.
type ChangelogState struct {
	MaterializationID int64
	Materialized      *savepoint.KeyedStateHandle // nil: nothing materialized yet
	MaterializedSize  int64
	MaterializedAdded bool // no earlier checkpoint referred to it
	Log               []savepoint.ChangelogFile
}

func (s *ChangelogSnapshot) KeyGroupRange() KeyGroupRange { return s.kgr }

// EncodeKeyGroup: a changelog checkpoint has no canonical blocks.
func (s *ChangelogSnapshot) EncodeKeyGroup(dst []byte, kg int) ([]byte, error) {
	return append(dst, 0), nil
}

// Release: nothing is pinned.
func (s *ChangelogSnapshot) Release() { s.released = true }

// Wait waits for the log files (and a forced materialization) and returns
// the checkpoint's state; it runs on the asynchronous side.
func (s *ChangelogSnapshot) Wait() (*ChangelogState, error) {
	m := s.mat
	if s.run != nil {
		<-s.run.done
		if s.run.err != nil {
			return nil, fmt.Errorf("materialize the restored state before the first checkpoint: %w", s.run.err)
		}
		m = s.run.m
	}
	files, err := s.w.Files(m.base, s.to)
	if err != nil {
		return nil, err
	}
	out := &ChangelogState{MaterializationID: m.id, Materialized: m.handle, MaterializedSize: m.size, MaterializedAdded: m.id != 0 && m.id != s.prevMat}
	for _, f := range files {
		out.Log = append(out.Log, savepoint.ChangelogFile{Path: f.Path, Size: f.Size, Added: f.Seq > s.prevCkpt, CRC32C: savepoint.FormatCRC32C(f.CRC32C)})
	}
	return out, nil
}

// MaterializationDue says when Tick must run next for materialization
// (zero: not scheduled): when the next one is due, or, if it waits for a
// checkpoint to complete (CheckpointPeriod), when it stops waiting — a
// completed checkpoint calls Tick itself (the operator's notifyComplete).
func (b *ChangelogBackend[K]) MaterializationDue() time.Time {
	if b.w == nil || b.run != nil || b.o.Interval <= 0 && !b.forced {
		return time.Time{} // a running one is collected at the next tick
	}
	if b.urgent() {
		return b.nextMat
	}
	p := b.o.CheckpointPeriod
	return b.nextMat.Add(p + p/2)
}

// urgent: a materialization after a restore or a lost log file, or the
// retry of a failed one, does not wait for a checkpoint.
func (b *ChangelogBackend[K]) urgent() bool { return b.forced || b.failures > 0 }

// startsNow decides whether a materialization due at due starts at now.
// An urgent one (restore, lost log file, retry), or any without a
// checkpoint period, starts once due. A periodic one starts right after a
// checkpoint completes: the first completed since the previous one started
// and no earlier than half a period before it is due, while that
// completion is less than half a period old (so that it never falls on the
// next checkpoint); if none completes, it starts a period and a half after
// it is due.
func startsNow(now, due, completed, lastStart time.Time, urgent bool, period time.Duration) bool {
	switch {
	case due.IsZero():
		return false
	case urgent || period <= 0:
		return !now.Before(due)
	case !now.Before(due.Add(period + period/2)):
		return true
	}
	return completed.After(lastStart) && !completed.Before(due.Add(-period/2)) && now.Sub(completed) < period/2
}

// restored: state came from a snapshot, which the log does not hold, so it
// is materialized at once — before the first checkpoint, which must not
// refer to the restored snapshot (NO_CLAIM).
func (b *ChangelogBackend[K]) restored() {
	if b.w != nil {
		b.forced, b.nextMat = true, b.o.Now()
	}
}

// Tick hands buffered changes to the persister after the persist delay,
// collects a finished materialization and starts a due one. An error
// means the task must fail over: materialization failed more often than
// state.changelog.max-failures-allowed. (A log file that cannot be
// written fails only the checkpoints that need it; see checkLog.)
func (b *ChangelogBackend[K]) Tick() error {
	if b.w == nil {
		return nil
	}
	now := b.o.Now()
	b.w.Tick(now)
	if err := b.collect(now); err != nil {
		return err
	}
	b.checkLog(now)
	if b.run != nil || b.MaterializationDue().IsZero() {
		return nil
	}
	if startsNow(now, b.nextMat, b.completed, b.lastStart, b.urgent(), b.o.CheckpointPeriod) {
		if !b.dirty && !b.forced {
			b.nextMat = now.Add(b.o.Interval) // nothing changed: nothing to write
			return nil
		}
		return b.Materialize()
	}
	return nil
}

// checkLog: a log file that could not be written fails every checkpoint
// that needs it, so the state is materialized past it at once.
func (b *ChangelogBackend[K]) checkLog(now time.Time) {
	if f := b.w.Failed(); f >= b.mat.base && !b.forced {
		b.forced, b.nextMat = true, now
	}
}

// collect takes the result of a finished materialization: from then on
// checkpoints refer to it.
func (b *ChangelogBackend[K]) collect(now time.Time) error {
	if r := b.run; r != nil {
		select {
		case <-r.done:
		default:
			return nil
		}
		b.run = nil
		took := now.Sub(r.start)
		if b.o.OnMaterialized != nil {
			b.o.OnMaterialized(r.m.id, r.m.size, took, r.err)
		}
		if r.err != nil {
			b.failures++
			b.dirty = true // what it would have covered still needs one
			if b.failures > b.o.MaxFailures {
				return fmt.Errorf("materialization of the changelog state backend failed %d times in a row (state.changelog.max-failures-allowed: %d): %w", b.failures, b.o.MaxFailures, r.err)
			}
			b.nextMat = now.Add(time.Second)
			if b.o.Interval > 0 {
				b.nextMat = now.Add(min(b.o.Interval, time.Second))
			}
			return nil
		}
		b.failures = 0
		b.mat, b.forced = r.m, false
		if b.o.MaterializeOptions != nil {
			// The next incremental materialization may refer to this
			// one's files.
			b.inner.CheckpointComplete(-r.m.id)
		}
		// From the start, not from when the run was collected (the next
		// tick or checkpoint): otherwise every period grew by that delay
		// and, with materializations starting after checkpoints, missed
		// the checkpoint it was meant to follow.
		b.nextMat = r.start.Add(b.o.Interval)
	}
	return nil
}

// Materialize starts a materialization: the wrapped backend's snapshot is
// taken here (its synchronous part), the log rolls so that every later
// change is in later files, and the snapshot is written on a goroutine of
// its own. One runs at a time.
func (b *ChangelogBackend[K]) Materialize() error {
	if b.w == nil || b.run != nil {
		return nil
	}
	var opts SnapshotOptions
	if b.o.MaterializeOptions != nil {
		opts = b.o.MaterializeOptions(b.matSeq + 1)
	}
	snap, err := b.inner.TakeSnapshot(opts)
	if err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	last := b.w.Roll()
	b.matSeq++
	r := &matRun{m: materialization{id: b.matSeq, base: last + 1}, start: b.o.Now(), done: make(chan struct{})}
	b.lastStart = r.start
	b.run, b.dirty = r, false
	if err := b.carryPending(); err != nil {
		snap.Release()
		return err
	}
	go func() {
		defer close(r.done)
		defer snap.Release()
		r.err = protectMaterialize(func() error {
			var err error
			r.m.handle, r.m.size, err = b.o.Materialize(snap, r.m.id)
			return err
		})
	}()
	return nil
}

// protectMaterialize turns a panicking serializer into a failed
// materialization.
func protectMaterialize(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("materialization panicked: %v", r)
		}
	}()
	return f()
}

// CheckpointComplete: the log files before the checkpoint's
// materialization are no checkpoint-to-come's business.
func (b *ChangelogBackend[K]) CheckpointComplete(id int64) {
	if b.w == nil || b.o.MaterializeOptions == nil {
		// With incremental materializations, the wrapped backend's
		// uploads are theirs, not the checkpoints'.
		b.inner.CheckpointComplete(id)
	}
	if b.w != nil {
		b.lastMatID = b.mat.id
		b.w.Forget(b.mat.base)
		b.completed = b.o.Now()
	}
}

func (b *ChangelogBackend[K]) CheckpointAborted(id int64) { b.inner.CheckpointAborted(id) }

// DropUnregistered drops restored state no operator registered, in the
// log as in the wrapped backend.
func (b *ChangelogBackend[K]) DropUnregistered() []string {
	out := b.inner.DropUnregistered()
	for name := range b.inLog {
		if !b.replayed[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	b.index = nil
	return out
}

// Dispose stops the persister, waits for a running materialization and
// disposes of the wrapped backend.
func (b *ChangelogBackend[K]) Dispose() error {
	if b.disposed {
		return nil
	}
	b.disposed = true
	var errs []error
	if b.w != nil {
		errs = append(errs, b.w.Close())
	}
	if b.run != nil {
		<-b.run.done
	}
	errs = append(errs, b.inner.Dispose())
	return errors.Join(errs...)
}

// replayThrough picks how a state's records replay: through the state's
// own key-explicit methods on every core when it has them (hashmap), else
// through the current key (viaKey) on one goroutine.
func replayThrough[A any](in any, viaKey A) (A, int) {
	if at, ok := in.(A); ok {
		return at, runtime.GOMAXPROCS(0)
	}
	return viaKey, 1
}

// Changelog states: each wraps the wrapped backend's state and logs what
// it changes.

type clValueState[K comparable, V any] struct {
	b   *ChangelogBackend[K]
	in  ValueState[V]
	ser Serializer[V]
	d   *clDecl
	// intStr: a string key and an integer value written as a varint, the
	// record written in one step (changelog.AppendSetStringVarint).
	intStr bool
}

func (s *clValueState[K, V]) Value() (V, bool) { return s.in.Value() }
func (s *clValueState[K, V]) Update(v V) {
	s.in.Update(v)
	if s.intStr {
		// What head does, then the whole record in one step.
		s.b.dirty = true
		k, kg := s.b.current()
		s.b.w.SetStringVarint(s.d.id, kg, asString(k), *(*int64)(unsafe.Pointer(&v)))
		return
	}
	w := s.b.head(changelog.OpSet, s.d)
	var st int
	w.Buf, st = changelog.BeginPrefixed(w.Buf)
	w.Buf = changelog.FinishPrefixed(s.ser.Append(w.Buf, v), st)
	w.Done()
}
func (s *clValueState[K, V]) Clear() {
	s.in.Clear()
	s.b.head(changelog.OpClear, s.d).Done()
}

func getChangelogValueState[V any, K comparable](b *ChangelogBackend[K], name string, ser Serializer[V]) (ValueState[V], error) {
	first, err := b.restoredFirst(name, KindValue)
	if err != nil {
		return nil, err
	}
	in, err := GetValueState(b.inner, name, ser)
	if err != nil {
		return nil, err
	}
	at, workers := replayThrough[valueAt[K, V]](in, valueViaKey[K, V]{b.viaCurrentKey(), in})
	err = b.replayKeyGroups(name, KindValue, workers, first(in), func(kgi int, k K, r *changelog.Record) error {
		switch r.Op {
		case changelog.OpSet:
			v, _, err := ser.Decode(r.A)
			if err != nil {
				return err
			}
			at.updateAt(kgi, k, v)
		case changelog.OpClear:
			at.clearAt(kgi, k)
		default:
			return fmt.Errorf("op %d on value state: %w", r.Op, changelog.ErrCorrupt)
		}
		return nil
	})
	if e, ok := in.(interface{ endReplay() }); ok {
		e.endReplay()
	}
	if err != nil || b.w == nil {
		return in, err
	}
	d := b.logDecl(name, KindValue)
	intStr := b.strKey && isVarint64(ser)
	if vs, ok := in.(*valueState[K, V]); ok && (vs.log != nil || intStr && !d.wrapped) {
		// The hashmap's state logs its own changes, the same records as
		// clValueState's, and is the state the function gets. (Registered
		// again, a state keeps the way it logs: never both ways, which
		// would log every change twice.)
		vs.log = &directLog{w: b.w, id: d.id, dirty: &b.dirty}
		return vs, nil
	}
	d.wrapped = true
	return &clValueState[K, V]{b: b, in: in, ser: ser, d: d, intStr: intStr}, nil
}

// Replay writes through these: a state's entries by key group index and
// key. The hashmap's states are them (safe on several goroutines for
// distinct key groups, so key groups replay on every core); any other
// state is adapted through the current key, on one goroutine.
type (
	valueAt[K comparable, V any] interface {
		updateAt(kgi int, k K, v V)
		clearAt(kgi int, k K)
	}
	listAt[K comparable, V any] interface {
		addAt(kgi int, k K, v V)
		updateAt(kgi int, k K, vs []V)
		clearAt(kgi int, k K)
	}
	mapAt[K comparable, UK comparable, UV any] interface {
		putAt(kgi int, k K, uk UK, uv UV)
		removeAt(kgi int, k K, uk UK)
		clearAt(kgi int, k K)
	}
)

// timersAt is the timers' counterpart (see Timers.registerAt).
type timersAt[K comparable] interface {
	registerAt(kgi int, k K, ts int64)
	deleteAt(kgi int, k K, ts int64)
}

type timersViaKey[K comparable] struct {
	currentKey[K]
	in TimerQueue
}

func (a timersViaKey[K]) registerAt(kgi int, k K, ts int64) { a.set(kgi, k); a.in.Register(ts) }
func (a timersViaKey[K]) deleteAt(kgi int, k K, ts int64)   { a.set(kgi, k); a.in.Delete(ts) }

// currentKey sets the wrapped backend's current key for an adapted state.
type currentKey[K comparable] struct {
	be    Backend[K]
	first int
}

func (b *ChangelogBackend[K]) viaCurrentKey() currentKey[K] {
	return currentKey[K]{b.inner, b.inner.KeyGroupRange().Start}
}

func (c currentKey[K]) set(kgi int, k K) { c.be.SetCurrentKeyAndGroup(k, c.first+kgi) }

type valueViaKey[K comparable, V any] struct {
	currentKey[K]
	in ValueState[V]
}

func (a valueViaKey[K, V]) updateAt(kgi int, k K, v V) { a.set(kgi, k); a.in.Update(v) }
func (a valueViaKey[K, V]) clearAt(kgi int, k K)       { a.set(kgi, k); a.in.Clear() }

type listViaKey[K comparable, V any] struct {
	currentKey[K]
	in ListState[V]
}

func (a listViaKey[K, V]) addAt(kgi int, k K, v V)       { a.set(kgi, k); a.in.Add(v) }
func (a listViaKey[K, V]) updateAt(kgi int, k K, vs []V) { a.set(kgi, k); a.in.Update(vs) }
func (a listViaKey[K, V]) clearAt(kgi int, k K)          { a.set(kgi, k); a.in.Clear() }

type mapViaKey[K comparable, UK comparable, UV any] struct {
	currentKey[K]
	in MapState[UK, UV]
}

func (a mapViaKey[K, UK, UV]) putAt(kgi int, k K, uk UK, uv UV) { a.set(kgi, k); a.in.Put(uk, uv) }
func (a mapViaKey[K, UK, UV]) removeAt(kgi int, k K, uk UK)     { a.set(kgi, k); a.in.Remove(uk) }
func (a mapViaKey[K, UK, UV]) clearAt(kgi int, k K)             { a.set(kgi, k); a.in.Clear() }

type clListState[K comparable, V any] struct {
	b   *ChangelogBackend[K]
	in  ListState[V]
	ser Serializer[V]
	d   *clDecl
}

func (s *clListState[K, V]) Get() []V { return s.in.Get() }
func (s *clListState[K, V]) Add(v V) {
	s.in.Add(v)
	w := s.b.head(changelog.OpListAdd, s.d)
	var st int
	w.Buf, st = changelog.BeginPrefixed(w.Buf)
	w.Buf = changelog.FinishPrefixed(s.ser.Append(w.Buf, v), st)
	w.Done()
}
func (s *clListState[K, V]) Update(vs []V) {
	s.in.Update(vs)
	if len(vs) == 0 {
		s.b.head(changelog.OpClear, s.d).Done()
		return
	}
	w := s.b.head(changelog.OpListSet, s.d)
	var st int
	w.Buf, st = changelog.BeginPrefixed(w.Buf)
	w.Buf = binary.AppendUvarint(w.Buf, uint64(len(vs)))
	for _, v := range vs {
		w.Buf = s.ser.Append(w.Buf, v)
	}
	w.Buf = changelog.FinishPrefixed(w.Buf, st)
	w.Done()
}
func (s *clListState[K, V]) Clear() {
	s.in.Clear()
	s.b.head(changelog.OpClear, s.d).Done()
}

func getChangelogListState[V any, K comparable](b *ChangelogBackend[K], name string, ser Serializer[V]) (ListState[V], error) {
	first, err := b.restoredFirst(name, KindList)
	if err != nil {
		return nil, err
	}
	in, err := GetListState(b.inner, name, ser)
	if err != nil {
		return nil, err
	}
	at, workers := replayThrough[listAt[K, V]](in, listViaKey[K, V]{b.viaCurrentKey(), in})
	err = b.replayKeyGroups(name, KindList, workers, first(in), func(kgi int, k K, r *changelog.Record) error {
		switch r.Op {
		case changelog.OpListAdd:
			v, _, err := ser.Decode(r.A)
			if err != nil {
				return err
			}
			at.addAt(kgi, k, v)
		case changelog.OpListSet:
			n, w := binary.Uvarint(r.A)
			if w <= 0 {
				return ErrShortBuffer
			}
			src := r.A[w:]
			vs := make([]V, 0, min(n, uint64(len(src))))
			for range n {
				v, rest, err := ser.Decode(src)
				if err != nil {
					return err
				}
				vs, src = append(vs, v), rest
			}
			at.updateAt(kgi, k, vs)
		case changelog.OpClear:
			at.clearAt(kgi, k)
		default:
			return fmt.Errorf("op %d on list state: %w", r.Op, changelog.ErrCorrupt)
		}
		return nil
	})
	if err != nil || b.w == nil {
		return in, err
	}
	return &clListState[K, V]{b: b, in: in, ser: ser, d: b.logDecl(name, KindList)}, nil
}

type clMapState[K comparable, UK comparable, UV any] struct {
	b     *ChangelogBackend[K]
	in    MapState[UK, UV]
	ukSer Serializer[UK]
	uvSer Serializer[UV]
	d     *clDecl
}

func (s *clMapState[K, UK, UV]) Get(uk UK) (UV, bool)    { return s.in.Get(uk) }
func (s *clMapState[K, UK, UV]) Contains(uk UK) bool     { return s.in.Contains(uk) }
func (s *clMapState[K, UK, UV]) All(f func(UK, UV) bool) { s.in.All(f) }
func (s *clMapState[K, UK, UV]) Len() int                { return s.in.Len() }
func (s *clMapState[K, UK, UV]) Put(uk UK, uv UV) {
	s.in.Put(uk, uv)
	w := s.b.head(changelog.OpMapPut, s.d)
	var st int
	w.Buf, st = changelog.BeginPrefixed(w.Buf)
	w.Buf = changelog.FinishPrefixed(s.ukSer.Append(w.Buf, uk), st)
	w.Buf, st = changelog.BeginPrefixed(w.Buf)
	w.Buf = changelog.FinishPrefixed(s.uvSer.Append(w.Buf, uv), st)
	w.Done()
}
func (s *clMapState[K, UK, UV]) Remove(uk UK) {
	s.in.Remove(uk)
	w := s.b.head(changelog.OpMapRemove, s.d)
	var st int
	w.Buf, st = changelog.BeginPrefixed(w.Buf)
	w.Buf = changelog.FinishPrefixed(s.ukSer.Append(w.Buf, uk), st)
	w.Done()
}
func (s *clMapState[K, UK, UV]) Clear() {
	s.in.Clear()
	s.b.head(changelog.OpClear, s.d).Done()
}

func getChangelogMapState[UK comparable, UV any, K comparable](b *ChangelogBackend[K], name string, ukSer Serializer[UK], uvSer Serializer[UV]) (MapState[UK, UV], error) {
	first, err := b.restoredFirst(name, KindMap)
	if err != nil {
		return nil, err
	}
	in, err := GetMapState(b.inner, name, ukSer, uvSer)
	if err != nil {
		return nil, err
	}
	at, workers := replayThrough[mapAt[K, UK, UV]](in, mapViaKey[K, UK, UV]{b.viaCurrentKey(), in})
	err = b.replayKeyGroups(name, KindMap, workers, first(in), func(kgi int, k K, r *changelog.Record) error {
		switch r.Op {
		case changelog.OpMapPut:
			uk, _, err := ukSer.Decode(r.A)
			if err != nil {
				return err
			}
			uv, _, err := uvSer.Decode(r.B)
			if err != nil {
				return err
			}
			at.putAt(kgi, k, uk, uv)
		case changelog.OpMapRemove:
			uk, _, err := ukSer.Decode(r.A)
			if err != nil {
				return err
			}
			at.removeAt(kgi, k, uk)
		case changelog.OpClear:
			at.clearAt(kgi, k)
		default:
			return fmt.Errorf("op %d on map state: %w", r.Op, changelog.ErrCorrupt)
		}
		return nil
	})
	if err != nil || b.w == nil {
		return in, err
	}
	return &clMapState[K, UK, UV]{b: b, in: in, ukSer: ukSer, uvSer: uvSer, d: b.logDecl(name, KindMap)}, nil
}

type clTimers[K comparable] struct {
	b  *ChangelogBackend[K]
	in TimerQueue
	d  *clDecl
}

func (q *clTimers[K]) Register(ts int64) {
	q.in.Register(ts)
	w := q.b.head(changelog.OpTimerAdd, q.d)
	w.Buf = binary.AppendVarint(w.Buf, ts)
	w.Done()
}
func (q *clTimers[K]) Delete(ts int64) {
	q.in.Delete(ts)
	w := q.b.head(changelog.OpTimerDel, q.d)
	w.Buf = binary.AppendVarint(w.Buf, ts)
	w.Done()
}
func (q *clTimers[K]) Next() (int64, bool) { return q.in.Next() }
func (q *clTimers[K]) Len() int            { return q.in.Len() }

// FireDue logs each timer's removal as it fires, with its key made
// current here too, for the state the handler changes.
func (q *clTimers[K]) FireDue(upTo int64, fire func(ts int64) error) error {
	return q.in.FireDue(upTo, func(ts int64) error {
		q.b.syncKey()
		w := q.b.head(changelog.OpTimerDel, q.d)
		w.Buf = binary.AppendVarint(w.Buf, ts)
		w.Done()
		return fire(ts)
	})
}

func getChangelogTimers[K comparable](b *ChangelogBackend[K], kind Kind) (TimerQueue, error) {
	name := ProcessingTimersName
	if kind == KindEventTime {
		name = EventTimersName
	}
	first, err := b.restoredFirst(name, kind)
	if err != nil {
		return nil, err
	}
	in, err := TimersFor(b.inner, kind)
	if err != nil {
		return nil, err
	}
	var at timersAt[K] = timersViaKey[K]{b.viaCurrentKey(), in}
	workers := 1
	if n, ok := in.(interface {
		timersAt[K]
		beginReplay()
	}); ok && b.inLog[name] != nil && !b.replayed[name] {
		n.beginReplay()
		at, workers = n, runtime.GOMAXPROCS(0)
	}
	err = b.replayKeyGroups(name, kind, workers, first(in), func(kgi int, k K, r *changelog.Record) error {
		switch r.Op {
		case changelog.OpTimerAdd:
			at.registerAt(kgi, k, r.Time)
		case changelog.OpTimerDel:
			at.deleteAt(kgi, k, r.Time)
		default:
			return fmt.Errorf("op %d on timers: %w", r.Op, changelog.ErrCorrupt)
		}
		return nil
	})
	if err != nil || b.w == nil {
		return in, err
	}
	return &clTimers[K]{b: b, in: in, d: b.logDecl(name, kind)}, nil
}

// keysOf lists the inner backend's keys: every change reaches it as it is
// made (the log only records them).
func (b *ChangelogBackend[K]) keysOf(name string) ([]K, error) { return b.inner.keysOf(name) }
