package cmd

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gflink/gflink/engine"
)

// statusLine is an attached run's live status on a terminal: one line on
// stderr, redrawn twice a second — throughput, the last checkpoint, back
// pressure — with log lines printed above it. It stands in for the INFO
// line each checkpoint would print (the log keeps those when stderr is not
// a terminal, and with --verbose).
type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	text string
	stop chan struct{}
	done chan struct{}
	// count, if set, counts the records the job's sources emit in all (a
	// bounded input): the line then starts with a progress bar and an
	// estimate of the time left. total holds its answer once known.
	count func() (int64, bool)
	total atomic.Int64
}

// clearLine returns to the line's start and clears it; noWrap and autoWrap
// turn the terminal's autowrap off around the status, so that a line
// wider than the terminal is cut rather than wrapped onto rows the next
// redraw would not clear.
const (
	clearLine = "\r\x1b[K"
	noWrap    = "\x1b[?7l"
	autoWrap  = "\x1b[?7h"
)

func (s *statusLine) draw() string {
	if s.text == "" {
		return ""
	}
	return noWrap + s.text + autoWrap
}

// Write prints a log line above the status line.
func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	io.WriteString(s.w, clearLine)
	n, err := s.w.Write(p)
	io.WriteString(s.w, s.draw())
	return n, err
}

func (s *statusLine) set(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.text = text
	io.WriteString(s.w, clearLine+s.draw())
}

// watch redraws the line from the job's metrics until the returned stop
// is called, which clears it.
func (s *statusLine) watch(j *engine.Job) (stop func()) {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	s.total.Store(-1)
	if s.count != nil {
		// Counting may read the input once: off the job's path, and not
		// waited for (it ends with the process at worst).
		go func() {
			if n, ok := s.count(); ok && n > 0 {
				s.total.Store(n)
			}
		}()
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				info, m := j.Info(), j.Metrics()
				s.set(progressText(s.total.Load(), m) + statusText(info, m))
			}
		}
	}()
	return func() {
		close(s.stop)
		<-s.done
		s.mu.Lock()
		defer s.mu.Unlock()
		s.text = ""
		io.WriteString(s.w, clearLine)
	}
}

// statusText is the status line: the job's state and uptime, records/s
// read by its sources and taken by its last vertices, the last completed
// checkpoint and the worst back pressure of any vertex.
func statusText(info engine.JobInfo, m engine.JobMetrics) string {
	feeds := map[string]bool{}
	for _, v := range info.Vertices {
		for _, in := range v.Inputs {
			feeds[in.ID] = true
		}
	}
	var in, out, worst float64
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			if v.Source && len(st.Operators) > 0 {
				r, _ := engine.GetMetric(st.Operators[0].Metrics, "numRecordsInPerSecond")
				in += r.Value
			}
			if !feeds[v.ID] {
				name := "numRecordsInPerSecond"
				ms := st.Task
				if v.Source && len(st.Operators) > 0 {
					ms = st.Operators[0].Metrics // a job of one vertex: what it reads
				}
				r, _ := engine.GetMetric(ms, name)
				out += r.Value
			}
			bp, _ := engine.GetMetric(st.Task, "backPressuredTimeMsPerSecond")
			worst = max(worst, bp.Value/1000)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s", info.Status)
	if up, ok := engine.GetMetric(m.Job, "uptime"); ok && up.Value > 0 {
		fmt.Fprintf(&b, " %s", (time.Duration(up.Value) * time.Millisecond).Truncate(time.Second))
	}
	fmt.Fprintf(&b, " | in %s/s | out %s/s", humanCount(in), humanCount(out))
	if c := info.Checkpoints.LatestCompleted; c != nil {
		fmt.Fprintf(&b, " | checkpoint %d: %d ms, %s", c.ID, c.EndToEndDuration, humanBytes(c.CheckpointedSize))
	} else {
		b.WriteString(" | no checkpoint yet")
	}
	fmt.Fprintf(&b, " | backpressure %s", engine.BackPressureLevel(worst))
	return b.String()
}

// progressText is the progress bar of a bounded input: the records its
// sources have read of total, and the time left at the current rate
// ("" while the total is not known).
func progressText(total int64, m engine.JobMetrics) string {
	if r, _ := engine.GetMetric(m.Job, "numRestarts"); total <= 0 || r.Value > 0 {
		// After a restart the sources resume from a checkpoint and count
		// from zero again: this attempt's reads say nothing of the whole.
		return ""
	}
	var read, rate float64
	for _, v := range m.Vertices {
		if !v.Source {
			continue
		}
		for _, st := range v.Subtasks {
			if len(st.Operators) > 0 {
				n, _ := engine.GetMetric(st.Operators[0].Metrics, "numRecordsIn")
				r, _ := engine.GetMetric(st.Operators[0].Metrics, "numRecordsInPerSecond")
				read, rate = read+n.Value, rate+r.Value
			}
		}
	}
	frac := min(read/float64(total), 1)
	const width = 20
	full := int(frac * width)
	bar := strings.Repeat("=", full) + strings.Repeat(" ", width-full)
	eta := "ETA -"
	if rate > 0 {
		eta = "ETA " + (time.Duration(max(float64(total)-read, 0) / rate * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s] %3.0f%% %s | ", bar, frac*100, eta)
}

// humanCount writes n records with a k or M suffix.
func humanCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1f M", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f k", n/1e3)
	}
	return fmt.Sprintf("%.0f", math.Round(n))
}

// humanBytes writes a size in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit && exp < 2; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMG"[exp])
}

// printsToStdout reports whether the job has a print sink: its output
// then shares the terminal, and a status line would break its lines.
func printsToStdout(g *engine.JobGraph) bool {
	for _, op := range g.Operators() {
		if strings.HasPrefix(op.Name, "Print") {
			return true
		}
	}
	return false
}
