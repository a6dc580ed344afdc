package task

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// Without idleness the valve's watermark is the minimum over its channels
// of the largest watermark each sent, and it only moves forward.
func TestValveIsTheMinimumOverChannels(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "channels")
		v := newValve(n)
		highest := make([]int64, n)
		for i := range highest {
			highest[i] = math.MinInt64
		}
		out := int64(math.MinInt64)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			ch := rapid.IntRange(0, n-1).Draw(t, "channel")
			wm := rapid.Int64Range(-5, 30).Draw(t, "watermark")
			highest[ch] = max(highest[ch], wm)
			got, ok := v.watermark(ch, wm)
			want := highest[0]
			for _, h := range highest {
				want = min(want, h)
			}
			if ok {
				if got <= out {
					t.Fatalf("the valve went from %d to %d", out, got)
				}
				out = got
			}
			if out != want {
				t.Fatalf("valve at %d, want the minimum %d of %v", out, want, highest)
			}
		}
	})
}

// With idleness: the watermark only moves forward, never beyond the
// largest watermark received, an idle channel holds nothing back, the
// valve is idle exactly when every channel is, and a watermark that
// advances an active channel brings the valve up to the minimum of the
// channels that count (as in Flink, a channel turning active again counts
// only from its next watermark on).
func TestValveWithIdleness(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "channels")
		v := newValve(n)
		idle := make([]bool, n)
		wms := make([]int64, n)
		for i := range wms {
			wms[i] = math.MinInt64
		}
		out, top, outIdle := int64(math.MinInt64), int64(math.MinInt64), false
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			ch := rapid.IntRange(0, n-1).Draw(t, "channel")
			var got int64
			var ok, advanced bool
			if rapid.Bool().Draw(t, "status") {
				toIdle := rapid.Bool().Draw(t, "idle")
				var changed bool
				got, ok, changed = v.status(ch, toIdle)
				idle[ch] = toIdle
				if changed {
					outIdle = !outIdle
				}
			} else {
				wm := rapid.Int64Range(-5, 30).Draw(t, "watermark")
				if !idle[ch] {
					advanced = wm > wms[ch]
					wms[ch] = max(wms[ch], wm)
					top = max(top, wm)
				}
				got, ok = v.watermark(ch, wm)
				if ok && idle[ch] {
					t.Fatalf("an idle channel's watermark moved the valve to %d", got)
				}
			}
			if ok {
				if got <= out || got > top {
					t.Fatalf("the valve went from %d to %d (largest received %d)", out, got, top)
				}
				out = got
			}
			all := true
			for _, i := range idle {
				all = all && i
			}
			if outIdle != all || v.idle != all {
				t.Fatalf("valve idle %v (told %v) with channels idle %v", v.idle, outIdle, idle)
			}
			if !advanced {
				continue
			}
			// Once every active channel has caught up, the valve is at
			// least their minimum.
			caught, m := true, int64(math.MaxInt64)
			for i := range wms {
				if !idle[i] {
					m = min(m, wms[i])
					caught = caught && v.chans[i].aligned
				}
			}
			if !all && caught && out < m {
				t.Fatalf("valve at %d below the minimum %d of its aligned active channels %v (idle %v)", out, m, wms, idle)
			}
		}
	})
}

// Flink's StatusWatermarkValveTest: when the last active channel goes
// idle, the valve flushes to the largest watermark of all channels.
func TestValveFlushesWhenAllIdle(t *testing.T) {
	v := newValve(2)
	v.watermark(0, 10)
	if wm, ok := v.watermark(1, 5); !ok || wm != 5 {
		t.Fatalf("got %d %v, want 5", wm, ok)
	}
	if wm, ok, changed := v.status(1, true); !ok || wm != 10 || changed {
		t.Fatalf("channel 1 idle: got %d %v %v, want 10 and the valve active", wm, ok, changed)
	}
	v.watermark(0, 12)
	if wm, ok, changed := v.status(0, true); ok || !changed || wm != 0 {
		t.Fatalf("all idle: got %d %v %v, want no new watermark (12 already out) and the valve idle", wm, ok, changed)
	}
	if _, _, changed := v.status(1, false); !changed || v.idle {
		t.Fatal("a channel active again makes the valve active")
	}
	// Channel 1 is at 5, below the valve's 12: it counts once it catches up.
	if _, ok := v.watermark(1, 11); ok {
		t.Fatal("a channel behind the valve moved it")
	}
	if wm, ok := v.watermark(1, 13); !ok || wm != 13 {
		t.Fatalf("got %d %v once channel 1 caught up (channel 0 idle): want 13", wm, ok)
	}
}
