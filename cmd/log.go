package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// logHandler writes log lines the way Flink's log4j pattern does:
//
//	2026-11-29 10:38:56,123 INFO  Completed checkpoint 3 for job … (1234 bytes, …).
type logHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
	// quiet leaves out the line each completed checkpoint logs (a live
	// status line shows the last one instead).
	quiet bool
}

func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(&logHandler{mu: &sync.Mutex{}, w: w, level: level})
}

// newQuietLogger is newLogger without the per-checkpoint INFO lines.
func newQuietLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(&logHandler{mu: &sync.Mutex{}, w: w, level: level, quiet: true})
}

func (h *logHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	if h.quiet && r.Level == slog.LevelInfo && strings.HasPrefix(r.Message, "Completed checkpoint ") {
		return nil
	}
	var b strings.Builder
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&b, ",%03d ", t.Nanosecond()/1e6)
	lvl := r.Level.String()
	b.WriteString(lvl)
	b.WriteString(strings.Repeat(" ", max(1, 6-len(lvl))))
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }

// logLevel reads GFLINK_LOG_LEVEL (debug, info, warn, error; default info).
func logLevel(f *Factory) slog.Level {
	var l slog.Level
	if v := f.Getenv("GFLINK_LOG_LEVEL"); v != "" && l.UnmarshalText([]byte(v)) == nil {
		return l
	}
	return slog.LevelInfo
}
