package connectors

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/stream"
)

// SocketSource reads lines from a TCP server (Flink's socketTextStream;
// `nc -lk 9999` serves one). It connects as a client, and when the server
// closes the connection or cannot be reached it tries again, MaxRetry
// times RetryDelay apart, before its input ends. A socket cannot rewind:
// after a failure what was in flight is lost (at most once), whatever the
// checkpointing mode. It runs at parallelism 1.
type SocketSource struct {
	Addr       string
	MaxRetry   int
	RetryDelay time.Duration
}

// NotReplayable implements stream.NonReplayableSource.
func (s *SocketSource) NotReplayable() string {
	return fmt.Sprintf("The socket source %s cannot rewind: after a failure the lines that were in flight are lost (at most once), even with checkpointing on. The job's state is still checkpointed and restored.", s.Addr)
}

// Splits implements stream.Source: one split, the address.
func (s *SocketSource) Splits(int) ([][]byte, error) { return [][]byte{[]byte(s.Addr)}, nil }

// CreateReader implements stream.Source.
func (s *SocketSource) CreateReader(stream.SourceContext) (stream.SourceReader[string], error) {
	return &socketReader{src: s, lines: make(chan string, 1024), done: make(chan struct{}), stop: make(chan struct{})}, nil
}

type socketReader struct {
	src    *SocketSource
	split  []byte
	lines  chan string
	done   chan struct{} // the connection loop ended: input over
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	conn   net.Conn
	err    error
	closed bool
}

// AddSplits implements stream.SourceReader: the one split starts the
// connection loop.
func (r *socketReader) AddSplits(splits [][]byte) error {
	if len(splits) == 0 {
		close(r.done) // another subtask reads the socket
		return nil
	}
	r.split = splits[0]
	go r.loop()
	return nil
}

func (r *socketReader) loop() {
	defer close(r.done)
	for attempt := 0; ; attempt++ {
		conn, err := net.DialTimeout("tcp", r.src.Addr, 5*time.Second)
		if err == nil {
			attempt = 0
			if !r.setConn(conn) {
				return
			}
			sc := bufio.NewScanner(conn)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				select {
				case r.lines <- strings.TrimSuffix(sc.Text(), "\r"):
				case <-r.stop:
					return
				}
			}
			conn.Close()
		}
		if attempt >= r.src.MaxRetry {
			if err != nil {
				r.mu.Lock()
				r.err = fmt.Errorf("socket source %s: %w (after %d retries)", r.src.Addr, err, r.src.MaxRetry)
				r.mu.Unlock()
			}
			return
		}
		select {
		case <-time.After(r.src.RetryDelay):
		case <-r.stop:
			return
		}
	}
}

// setConn records the connection so that Close can cut a blocked read.
func (r *socketReader) setConn(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conn = c
	return true
}

// PollNext implements stream.SourceReader.
func (r *socketReader) PollNext(out stream.Collector[string]) (stream.InputStatus, error) {
	for n := 0; n < 256; n++ {
		select {
		case l := <-r.lines:
			out.Collect(l)
			continue
		default:
		}
		if n > 0 {
			return stream.MoreAvailable, nil
		}
		select {
		case <-r.done:
			if len(r.lines) > 0 {
				return stream.MoreAvailable, nil
			}
			r.mu.Lock()
			err := r.err
			r.mu.Unlock()
			if err != nil {
				return 0, err
			}
			return stream.EndOfInput, nil
		default:
			return stream.NothingAvailable, nil
		}
	}
	return stream.MoreAvailable, nil
}

// NextPollTime implements stream.AvailabilityWaiter.
func (r *socketReader) NextPollTime() time.Time { return time.Now().Add(2 * time.Millisecond) }

// SnapshotState implements stream.SourceReader: the split, without a
// position — there is none to go back to.
func (r *socketReader) SnapshotState(int64) ([][]byte, error) {
	if r.split == nil {
		return nil, nil
	}
	return [][]byte{r.split}, nil
}

// Close implements stream.SourceReader.
func (r *socketReader) Close() error {
	r.once.Do(func() {
		close(r.stop)
		r.mu.Lock()
		r.closed = true
		if r.conn != nil {
			r.conn.Close()
		}
		r.mu.Unlock()
	})
	if r.split != nil {
		<-r.done
	}
	return nil
}
