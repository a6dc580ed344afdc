// Command ledger is gflink with a job built on a source and a sink of its
// own: Transfers, a source that generates numbered transfers between
// accounts (every transfer a pure function of its number, so a split is a
// range of numbers and its position the next one), and JournalSink, a
// two-phase-commit sink that makes its lines visible only when the
// checkpoint that covers them completes. Between them, a keyed stage keeps
// each account's balance.
//
//	go build -o gflink-ledger ./examples/ledger
//	./gflink-ledger run -p 2 ledger --transfers 100000 --accounts 50 --output /tmp/journal
//
// A journal line is "<account> <transfer> <n> <balance>": the n-th transfer
// applied to the account and its balance after it.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gflink/gflink/cli"
	"github.com/gflink/gflink/stream"
)

func main() { cli.Main(Job()) }

// Transfer moves Amount to (or, negative, from) Account.
type Transfer struct {
	ID      int64
	Account int64
	Amount  int64
}

// TransferAt is transfer number i of a ledger of the given accounts: a
// pure function of i (a splitmix64 hash), which is what makes the source
// replayable from a position.
func TransferAt(i, accounts int64) Transfer {
	z := uint64(i) + 0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	z ^= z >> 31
	return Transfer{ID: i, Account: int64(z % uint64(accounts)), Amount: int64(z>>32%2001) - 1000}
}

// Transfers is the source: transfers 0 … N-1, in one split per subtask.
type Transfers struct {
	N, Accounts int64
	Rate        float64 // transfers per second over all subtasks; 0: as fast as possible
}

// A split is [next, end) as two big-endian uint64s; next is the position.
func encodeSplit(next, end int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(next)), uint64(end))
}

// Splits cuts the range into one split per subtask (a fresh start).
func (s *Transfers) Splits(parallelism int) ([][]byte, error) {
	var out [][]byte
	for i := range int64(parallelism) {
		out = append(out, encodeSplit(s.N*i/int64(parallelism), s.N*(i+1)/int64(parallelism)))
	}
	return out, nil
}

// CheckRestoredSplits refuses splits that are not two positions within N:
// the snapshot of another job, or of this one with fewer transfers.
func (s *Transfers) CheckRestoredSplits(splits [][]byte) error {
	for _, b := range splits {
		if len(b) != 16 {
			return fmt.Errorf("a restored split of %d bytes is not a ledger split (16 bytes)", len(b))
		}
		if end := int64(binary.BigEndian.Uint64(b[8:])); end > s.N {
			return fmt.Errorf("a restored split ends at transfer %d, beyond --transfers %d", end, s.N)
		}
	}
	return nil
}

// CreateReader makes one subtask's reader.
func (s *Transfers) CreateReader(ctx stream.SourceContext) (stream.SourceReader[Transfer], error) {
	r := &reader{accounts: s.Accounts}
	if s.Rate > 0 {
		r.interval = time.Duration(float64(time.Second) * float64(ctx.Parallelism) / s.Rate)
		r.next = time.Now()
	}
	return r, nil
}

type reader struct {
	accounts int64
	splits   [][2]int64 // next, end
	interval time.Duration
	next     time.Time
}

func (r *reader) AddSplits(splits [][]byte) error {
	for _, b := range splits {
		if len(b) != 16 {
			return fmt.Errorf("ledger: a split of %d bytes", len(b))
		}
		r.splits = append(r.splits, [2]int64{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))})
	}
	return nil
}

// PollNext emits up to 100 transfers: few enough that a checkpoint barrier
// waits little.
func (r *reader) PollNext(out stream.Collector[Transfer]) (stream.InputStatus, error) {
	for i := range r.splits {
		sp := &r.splits[i]
		for n := 0; sp[0] < sp[1] && n < 100; n++ {
			if r.interval > 0 {
				if now := time.Now(); now.Before(r.next) {
					return stream.NothingAvailable, nil
				}
				r.next = r.next.Add(r.interval)
			}
			out.Collect(TransferAt(sp[0], r.accounts))
			sp[0]++
		}
		if sp[0] < sp[1] {
			return stream.MoreAvailable, nil
		}
	}
	return stream.EndOfInput, nil
}

// NextPollTime tells the task when the rate allows the next transfer.
func (r *reader) NextPollTime() time.Time { return r.next }

func (r *reader) SnapshotState(int64) ([][]byte, error) {
	out := make([][]byte, len(r.splits))
	for i, sp := range r.splits {
		out[i] = encodeSplit(sp[0], sp[1])
	}
	return out, nil
}

func (r *reader) Close() error { return nil }

// Entry is a journal line.
type Entry struct {
	Account, Transfer, N, Balance int64
}

func (e Entry) AppendTo(dst []byte) []byte {
	dst = strconv.AppendInt(dst, e.Account, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, e.Transfer, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, e.N, 10)
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, e.Balance, 10)
}

// Balances keeps each account's balance and the number of transfers
// applied to it.
type Balances struct {
	balance, n stream.ValueState[int64]
}

func (b *Balances) Open(ctx *stream.Context[int64]) (err error) {
	if b.balance, err = stream.GetValueState[int64](ctx, "balance"); err != nil {
		return err
	}
	b.n, err = stream.GetValueState[int64](ctx, "applied")
	return err
}

func (b *Balances) ProcessElement(ctx *stream.Context[int64], t Transfer, out stream.Collector[Entry]) error {
	bal, _ := b.balance.Value()
	n, _ := b.n.Value()
	bal, n = bal+t.Amount, n+1
	b.balance.Update(bal)
	b.n.Update(n)
	out.Collect(Entry{Account: t.Account, Transfer: t.ID, N: n, Balance: bal})
	return nil
}

// JournalSink writes journal lines to Dir with a two-phase commit: each
// writer appends to a hidden file of its own, which PrepareCommit closes
// (synced) at every checkpoint and hands over by name; the committer
// renames it to journal-… once the checkpoint is complete. What a failed
// attempt wrote after its last checkpoint stays hidden and is written
// again after the restore.
type JournalSink struct{ Dir string }

func (s *JournalSink) CreateWriter(ctx stream.SinkContext) (stream.SinkWriter[Entry], error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	return &journalWriter{dir: s.Dir, prefix: fmt.Sprintf(".journal-%s-%d-", ctx.RunID, ctx.Subtask)}, nil
}

func (s *JournalSink) CreateCommitter(stream.SinkContext) (stream.Committer, error) {
	return &journalCommitter{dir: s.Dir}, nil
}

type journalWriter struct {
	dir, prefix string
	seq         int
	f           *os.File
	buf         []byte
}

func (w *journalWriter) Write(e Entry) error {
	w.buf = append(e.AppendTo(w.buf), '\n')
	if len(w.buf) < 64<<10 {
		return nil
	}
	return w.flush()
}

func (w *journalWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if w.f == nil {
		f, err := os.OpenFile(filepath.Join(w.dir, w.prefix+strconv.Itoa(w.seq)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		w.f = f
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *journalWriter) Flush(bool) error { return w.flush() }

// PrepareCommit syncs and closes the current file and hands over its name.
func (w *journalWriter) PrepareCommit() ([][]byte, error) {
	if err := w.flush(); err != nil || w.f == nil {
		return nil, err
	}
	name := filepath.Base(w.f.Name())
	err := errors.Join(w.f.Sync(), w.f.Close())
	w.f, w.seq = nil, w.seq+1
	if err != nil {
		return nil, err
	}
	return [][]byte{[]byte(name)}, nil
}

// Close abandons the open file: nothing in it is covered by a checkpoint.
func (w *journalWriter) Close() error {
	if w.f != nil {
		w.f.Close()
	}
	return nil
}

type journalCommitter struct{ dir string }

// Commit renames hidden files to visible ones. It is idempotent, as a
// restore commits the restored checkpoint's committables again: a file
// already renamed is done.
func (c *journalCommitter) Commit(committables [][]byte) error {
	for _, name := range committables {
		from := filepath.Join(c.dir, string(name))
		to := filepath.Join(c.dir, string(name[1:]))
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if err := os.Rename(from, to); err != nil {
			// Nothing can commit it later: retrying would fail the same way.
			return stream.SuppressRestarts(fmt.Errorf("commit %s: %w", name, err))
		}
	}
	d, err := os.Open(c.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (c *journalCommitter) Close() error { return nil }

type args struct {
	transfers, accounts int64
	output              string
	rate                float64
}

func flags(a *args) *flag.FlagSet {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int64Var(&a.transfers, "transfers", 1000, "how many transfers to generate")
	fs.Int64Var(&a.accounts, "accounts", 10, "how many accounts they go to")
	fs.StringVar(&a.output, "output", "", "the journal's directory (required)")
	fs.Float64Var(&a.rate, "rate", 0, "transfers per second (0: as fast as possible)")
	return fs
}

// Job is the ledger job.
func Job() stream.Job {
	return stream.Job{
		Name:        "ledger",
		DisplayName: "Ledger",
		Description: "Applies generated transfers to account balances and journals them exactly once.",
		Usage: func(w io.Writer) {
			fmt.Fprintln(w, "Usage: gflink run [OPTIONS] ledger --output <dir> [--transfers <n>] [--accounts <n>] [--rate <n/s>]")
			fs := flags(&args{})
			fs.SetOutput(w)
			fs.PrintDefaults()
		},
		Build: build,
	}
}

func build(env *stream.Environment, argv []string) error {
	var a args
	fs := flags(&a)
	if err := fs.Parse(argv); err != nil {
		return &stream.UsageError{Msg: "ledger: " + err.Error(), Help: err == flag.ErrHelp}
	}
	switch {
	case fs.NArg() > 0:
		return &stream.UsageError{Msg: fmt.Sprintf("ledger: unexpected argument %q", fs.Arg(0))}
	case a.output == "":
		return &stream.UsageError{Msg: "ledger: --output <dir> is required"}
	case a.transfers < 0 || a.accounts < 1:
		return &stream.UsageError{Msg: fmt.Sprintf("ledger: --transfers must be >= 0 and --accounts >= 1, got %d and %d", a.transfers, a.accounts)}
	}
	env.SetJobName("Ledger")
	transfers := stream.FromSource[Transfer](env, &Transfers{N: a.transfers, Accounts: a.accounts, Rate: a.rate}, "transfers").UID("source")
	entries := stream.Process(stream.KeyBy(transfers, func(t Transfer) int64 { return t.Account }), &Balances{}).
		Name("balances").UID("balances")
	entries.SinkTo(&JournalSink{Dir: a.output}).Name("journal").UID("journal")
	return nil
}
