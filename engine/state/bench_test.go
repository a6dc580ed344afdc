package state

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks use word-count-like state: n string keys of 7–12 bytes
// with an int64 count each, in 128 key groups.
const benchKeys = 1_000_000

func benchKey(i int) string { return "w" + strconv.Itoa(i*7919%100_000_007) }

func benchBackend(tb testing.TB, n int) (*KeyedBackend[string], ValueState[int64], []string) {
	tb.Helper()
	b := backendFor(128)
	v, err := GetValueState[int64](b, "count", SerializerFor[int64]())
	if err != nil {
		tb.Fatal(err)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = benchKey(i)
		b.SetCurrentKey(keys[i])
		v.Update(int64(i))
	}
	return b, v, keys
}

// encodeSnapshot takes a snapshot of be and encodes its 128 key groups, one
// after another, into dst (reused), then releases it.
func encodeSnapshot(be *KeyedBackend[string], dst []byte) []byte {
	s := be.Snapshot()
	for kg := range 128 {
		dst = encodeKG(s, dst[:0], kg)
	}
	s.Release()
	return dst
}

// BenchmarkSnapshotEncode: the asynchronous part of a snapshot of 1 M keys,
// all key groups encoded into one reused buffer.
func BenchmarkSnapshotEncode(b *testing.B) {
	// At 5 M keys a key group's table (1.5 MB) no longer sits in the
	// processor's cache beside the job's, unlike at 1 M.
	for _, n := range []int{benchKeys, 5 * benchKeys} {
		b.Run(fmt.Sprintf("keys=%dM", n/1_000_000), func(b *testing.B) {
			be, _, _ := benchBackend(b, n)
			var dst []byte
			// The first snapshot sorts every key; later ones, of a state
			// whose keys did not change, keep that order: measured here.
			dst = encodeSnapshot(be, dst)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				dst = encodeSnapshot(be, dst)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
		})
	}
}

// BenchmarkSnapshotEncodeAdded: as BenchmarkSnapshotEncode from 1 M keys,
// but 1% new keys are inserted before each snapshot (timed apart), so every
// snapshot sorts those and merges them into the kept order: a job whose
// key space still grows. ns/entry divides by the entries every snapshot
// held, which grow with the iterations.
func BenchmarkSnapshotEncodeAdded(b *testing.B) {
	n := benchKeys
	be, v, _ := benchBackend(b, n)
	var dst []byte
	dst = encodeSnapshot(be, dst)
	next, entries := n, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for range n / 100 {
			be.SetCurrentKey(benchKey(next))
			v.Update(int64(next))
			next++
		}
		entries += next
		b.StartTimer()
		dst = encodeSnapshot(be, dst)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
}

// BenchmarkWriteDuringSnapshot: the task updates random keys while a
// snapshot of 1 M keys is encoded on another goroutine, then for as long
// again after it is released (while layers fold). Reported: the longest time
// 100 consecutive updates took then (the task's longest pause), the same
// over as many updates with no snapshot (what the machine alone costs: GC,
// the scheduler, other processes), the longest fold of a key group, and the
// snapshot's synchronous part.
func BenchmarkWriteDuringSnapshot(b *testing.B) {
	be, v, keys := benchBackend(b, benchKeys)
	r := rand.New(rand.NewPCG(1, 1))
	// Wall time includes the time the OS gives the core to someone else
	// (other processes, the encoder: this machine may have fewer cores
	// than runnable threads); the thread's CPU time does not.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var openCPU, idleCPU []time.Duration
	cpu := &openCPU
	update := func() time.Duration {
		t, c := time.Now(), threadCPU()
		for range 100 {
			be.SetCurrentKey(keys[r.IntN(len(keys))])
			n, _ := v.Value()
			v.Update(n + 1)
		}
		*cpu = append(*cpu, threadCPU()-c)
		return time.Since(t)
	}
	var open, idle []time.Duration
	var syncPart time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		s := be.Snapshot()
		syncPart = max(syncPart, time.Since(t0))
		encoded := make(chan struct{})
		go func() {
			var dst []byte
			for kg := range 128 {
				dst = encodeKG(s, dst[:0], kg)
			}
			s.Release()
			close(encoded)
		}()
		batches := 0
	encoding:
		for {
			select {
			case <-encoded:
				break encoding
			default:
			}
			open = append(open, update())
			batches++
		}
		for range batches {
			open = append(open, update())
		}
		// The same number of updates with no snapshot open.
		be.FoldLayers()
		cpu = &idleCPU
		for range 2 * batches {
			idle = append(idle, update())
		}
		cpu = &openCPU
	}
	for _, d := range [][]time.Duration{open, idle, openCPU, idleCPU} {
		slices.Sort(d)
	}
	q := func(d []time.Duration, f float64) float64 { return float64(d[int(f*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(q(open, 1), "max-µs/100-updates")
	b.ReportMetric(q(open, 0.999), "p99.9-µs/100-updates")
	b.ReportMetric(q(idle, 1), "no-snapshot-max-µs")
	b.ReportMetric(q(idle, 0.999), "no-snapshot-p99.9-µs")
	b.ReportMetric(q(openCPU, 1), "cpu-max-µs/100-updates")
	b.ReportMetric(q(idleCPU, 1), "no-snapshot-cpu-max-µs")
	b.ReportMetric(float64(syncPart.Microseconds()), "sync-µs")
}

// BenchmarkFoldKeyGroup: the longest one access spends folding at 1 M keys
// when every key of its key group (~7,800) was written while a snapshot was
// open (at most foldBudget entries move per access).
func BenchmarkFoldKeyGroup(b *testing.B) {
	be, v, keys := benchBackend(b, benchKeys)
	var kgKeys []string
	for _, k := range keys {
		if be.KeyGroupOf(k) == 5 {
			kgKeys = append(kgKeys, k)
		}
	}
	var worst time.Duration
	for b.Loop() {
		s := be.Snapshot()
		for _, k := range kgKeys {
			be.SetCurrentKey(k)
			n, _ := v.Value()
			v.Update(n + 1)
		}
		s.Release()
		t0 := time.Now()
		be.SetCurrentKey(kgKeys[0])
		v.Value() // folds the key group
		worst = max(worst, time.Since(t0))
	}
	b.ReportMetric(float64(len(kgKeys)), "keys")
	b.ReportMetric(float64(worst.Microseconds()), "max-fold-µs")
}

// BenchmarkRestore: restoring 1 M keys ÷ a hand-written decode of the same
// bytes into one plain map (restore/hand), and into one plain map per key
// group (restore/hand-per-kg: the backend's layout, whose maps fit in cache
// one at a time).
func BenchmarkRestore(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			be, _, _ := benchBackend(b, benchKeys)
			s := be.Snapshot()
			var blocks []KeyGroupBlock
			for kg := range 128 {
				blocks = append(blocks, KeyGroupBlock{kg, encodeKG(s, nil, kg)})
			}
			s.Release()
			be = nil
			runtime.GC()
			var restore, hand, handKG time.Duration
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				r := backendFor(128)
				if _, err := GetValueState[int64](r, "count", SerializerFor[int64]()); err != nil {
					b.Fatal(err)
				}
				if err := r.RestoreKeyGroups(blocks, workers); err != nil {
					b.Fatal(err)
				}
				restore += time.Since(t0)
				r = nil
				runtime.GC()
				t0 = time.Now()
				m := handDecode(blocks)
				hand += time.Since(t0)
				if len(m) != benchKeys {
					b.Fatal(len(m))
				}
				m = nil
				runtime.GC()
				t0 = time.Now()
				ms := handDecodePerKG(blocks)
				handKG += time.Since(t0)
				if len(ms) != 128 {
					b.Fatal(len(ms))
				}
				ms = nil
				runtime.GC()
			}
			b.ReportMetric(float64(restore)/float64(hand), "restore/hand")
			b.ReportMetric(float64(restore)/float64(handKG), "restore/hand-per-kg")
			b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
			b.ReportMetric(float64(hand.Milliseconds())/float64(b.N), "hand-ms")
			b.ReportMetric(float64(handKG.Milliseconds())/float64(b.N), "hand-per-kg-ms")
		})
	}
}

// handDecode is the hand-written decode BenchmarkRestore compares with:
// the blocks of one value state of int64 into one presized map.
func handDecode(blocks []KeyGroupBlock) map[string]int64 {
	m := make(map[string]int64, benchKeys)
	for _, blk := range blocks {
		handDecodeInto(m, blk.Block)
	}
	return m
}

// handDecodePerKG is handDecode into one presized map per key group.
func handDecodePerKG(blocks []KeyGroupBlock) []map[string]int64 {
	out := make([]map[string]int64, len(blocks))
	for i, blk := range blocks {
		out[i] = handDecodeInto(nil, blk.Block)
	}
	return out
}

func handDecodeInto(m map[string]int64, block []byte) map[string]int64 {
	p := block[1:] // one state
	n, k := binary.Uvarint(p)
	p = p[k+int(n):] // name
	p = p[1:]        // kind
	n, k = binary.Uvarint(p)
	p = p[k+int(n):] // type
	_, k = binary.Uvarint(p)
	p = p[k:] // payload length
	cnt, k := binary.Uvarint(p)
	p = p[k:]
	if m == nil {
		m = make(map[string]int64, cnt)
	}
	for range cnt {
		n, k := binary.Uvarint(p)
		key := string(p[k : k+int(n)])
		p = p[k+int(n):]
		v, k2 := binary.Varint(p)
		p = p[k2:]
		m[key] = v
	}
	return m
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkMemory: heap in use for 1 M keys in value state ÷ a plain
// map[string]int64 of the same keys (each map holding its own copy of the
// keys): with no snapshot, with a snapshot open while 10% and then 100% of
// the keys are updated (the worst case: every key written before the
// snapshot releases its key group), and folded again (updates store the
// caller's key strings, which the benchmark keeps anyway, in place of the
// backend's copies, hence below 1).
func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		keys := make([]string, benchKeys)
		for i := range keys {
			keys[i] = benchKey(i)
		}
		base := heapInUse()
		plain := map[string]int64{}
		for i, k := range keys {
			plain[strings.Clone(k)] = int64(i) // its own keys, as the backend's
		}
		plainBytes := float64(heapInUse() - base)
		runtime.KeepAlive(plain)
		plain = nil
		base = heapInUse()
		be := backendFor(128)
		v, _ := GetValueState[int64](be, "count", SerializerFor[int64]())
		for i, k := range keys {
			be.SetCurrentKey(k)
			v.Update(int64(i))
		}
		b.ReportMetric(float64(heapInUse()-base)/plainBytes, "backend/plain")
		s := be.Snapshot()
		for i, k := range keys[:benchKeys/10] {
			be.SetCurrentKey(k)
			v.Update(int64(i + 1))
		}
		b.ReportMetric(float64(heapInUse()-base)/plainBytes, "10%-written/plain")
		for i, k := range keys {
			be.SetCurrentKey(k)
			v.Update(int64(i + 2))
		}
		b.ReportMetric(float64(heapInUse()-base)/plainBytes, "all-written/plain")
		s.Release()
		be.FoldLayers()
		b.ReportMetric(float64(heapInUse()-base)/plainBytes, "folded/plain")
		b.ReportMetric(plainBytes/benchKeys, "plain-B/key")
		runtime.KeepAlive(be)
		runtime.KeepAlive(keys)
	}
}
