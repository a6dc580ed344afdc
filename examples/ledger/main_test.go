package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/stream"
)

// TestLedgerExactlyOnceUnderFailures runs the custom source and the
// two-phase-commit sink at parallelism 2 with checkpoints and three
// injected failures, each restored from a checkpoint, and checks the
// journal against what the transfers imply: every transfer exactly once,
// every account's entries numbered 1…n with no gap or repeat, and its last
// balance the sum of its transfers.
func TestLedgerExactlyOnceUnderFailures(t *testing.T) {
	const n, accounts = 30000, 37
	dir := t.TempDir()
	var log testutil.SyncBuffer
	env, err := stream.NewEnvironment(stream.Options{
		Config: testutil.FailingJob(dir, 2, 2000, 3),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "journal")
	if err := Job().Build(env, []string{"--output", out, "--transfers", strconv.Itoa(n),
		"--accounts", strconv.Itoa(accounts), "--rate", "40000"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.CheckRestores(t, log.String(), 3)

	// The oracle: the transfers themselves.
	sum, count := map[int64]int64{}, map[int64]int64{}
	for i := range int64(n) {
		tr := TransferAt(i, accounts)
		sum[tr.Account] += tr.Amount
		count[tr.Account]++
	}
	seen := map[int64]bool{}
	numbers := map[int64]map[int64]bool{}
	last := map[int64]int64{}
	files, _ := filepath.Glob(filepath.Join(out, "journal-*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var v [4]int64
			for i, s := range strings.Fields(line) {
				v[i], _ = strconv.ParseInt(s, 10, 64)
			}
			acct, id, k, bal := v[0], v[1], v[2], v[3]
			if seen[id] {
				t.Fatalf("transfer %d journaled twice", id)
			}
			seen[id] = true
			if numbers[acct] == nil {
				numbers[acct] = map[int64]bool{}
			}
			if numbers[acct][k] {
				t.Fatalf("account %d: entry %d twice", acct, k)
			}
			numbers[acct][k] = true
			if k == count[acct] {
				last[acct] = bal
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d transfers journaled", len(seen), n)
	}
	for a, c := range count {
		if int64(len(numbers[a])) != c || last[a] != sum[a] {
			t.Errorf("account %d: %d entries, last balance %d; want %d and %d", a, len(numbers[a]), last[a], c, sum[a])
		}
	}
}

func TestRestoredSplitsChecked(t *testing.T) {
	s := &Transfers{N: 10, Accounts: 2}
	if err := s.CheckRestoredSplits([][]byte{encodeSplit(3, 20)}); err == nil {
		t.Error("a split beyond --transfers was accepted")
	}
	if err := s.CheckRestoredSplits([][]byte{[]byte("short")}); err == nil {
		t.Error("a split of the wrong size was accepted")
	}
	if err := s.CheckRestoredSplits([][]byte{encodeSplit(3, 10)}); err != nil {
		t.Error(err)
	}
}
