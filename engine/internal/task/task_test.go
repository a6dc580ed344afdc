package task

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/engine/internal/network"
	"github.com/gflink/gflink/internal/api"
)

// failingOp is an operator whose checkpoint callbacks fail.
type failingOp struct{ err error }

func (failingOp) open(*OpContext) error                         { return nil }
func (o failingOp) prepareSnapshot(int64) error                 { return o.err }
func (failingOp) snapshot(snapshotRequest) (*opCapture, error)  { return nil, nil }
func (o failingOp) notifyComplete(int64) error                  { return o.err }
func (failingOp) notifyAborted(int64)                           {}
func (o failingOp) endInput() error                             { return o.err }
func (failingOp) idle()                                         {}
func (failingOp) close() error                                  { return nil }
func (failingOp) nextTimer() (int64, bool)                      { return 0, false }
func (o failingOp) fireTimers(int64) error                      { return o.err }
func (o failingOp) processWatermark(int64) (int64, bool, error) { return 0, false, o.err }

// Mail handlers report an operator's failure as the task's error; they
// used to panic, relying on a recover further up.
func TestMailHandlersReturnErrors(t *testing.T) {
	boom := errors.New("commit refused")
	for _, m := range []network.Mail{
		{Kind: network.MailComplete, ID: 1},
		{Kind: network.MailTrigger, Barrier: network.Barrier{ID: 1}},
		{Kind: network.MailDrain},
	} {
		tk := &Task{Name: "t (1/1)", Wiring: Wiring{Ops: []Operator{failingOp{err: boom}}, UIDs: []string{"op"}, Source: sourceRunnerStub{}},
			Mail: network.NewMailbox(), svc: &Services{Clock: time.Now}}
		tk.Mail.Put(m)
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("mail %d panicked: %v", m.Kind, r)
				}
			}()
			err = tk.handleMail()
		}()
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "t (1/1)") {
			t.Errorf("mail %d: err %v; want the operator's error, naming the task", m.Kind, err)
		}
	}
}

// The lifecycle moves only along its documented transitions; anything else
// is an error naming both states, not a silent change.
func TestTaskLifecycleTransitions(t *testing.T) {
	all := []lifecycle{lifeRunning, lifePaused, lifeEndedInput, lifeSuspended, lifeFinished}
	legal := map[[2]lifecycle]bool{
		{lifeRunning, lifePaused}: true, {lifePaused, lifeRunning}: true, {lifePaused, lifeSuspended}: true,
		{lifeRunning, lifeSuspended}: true, {lifeRunning, lifeEndedInput}: true, {lifePaused, lifeEndedInput}: true,
		{lifeEndedInput, lifeFinished}: true,
	}
	for _, from := range all {
		for _, to := range all {
			tk := &Task{Name: "t", life: life{state: from}}
			err := tk.setState(to)
			if legal[[2]lifecycle{from, to}] {
				if err != nil || tk.state != to {
					t.Errorf("%s -> %s: %v", from, to, err)
				}
				continue
			}
			if err == nil || tk.state != from || !strings.Contains(err.Error(), from.String()+" -> "+to.String()) {
				t.Errorf("%s -> %s must be refused: err %v, state %s", from, to, err, tk.state)
			}
		}
	}
}

// A stop-with-savepoint that is aborted resumes a paused source.
func TestAbortResumesPausedSource(t *testing.T) {
	tk := &Task{Name: "t", life: life{state: lifePaused, suspendFor: 7}, Mail: network.NewMailbox()}
	tk.Mail.Put(network.Mail{Kind: network.MailAbort, ID: 6})
	if err := tk.handleMail(); err != nil || tk.state != lifePaused {
		t.Fatalf("abort of another checkpoint: %v, state %s", err, tk.state)
	}
	tk.Mail.Put(network.Mail{Kind: network.MailAbort, ID: 7})
	if err := tk.handleMail(); err != nil || tk.state != lifeRunning {
		t.Fatalf("abort of the stop's savepoint: %v, state %s; want RUNNING", err, tk.state)
	}
}

type sourceRunnerStub struct{}

func (sourceRunnerStub) poll() (api.InputStatus, int64, error) { return api.EndOfInput, 0, nil }
func (sourceRunnerStub) nextPollTime(now time.Time) time.Time  { return now }
func (sourceRunnerStub) pendingRecords() (int64, bool)         { return 0, false }
func (sourceRunnerStub) bytesIn() (int64, bool)                { return 0, false }
func (sourceRunnerStub) lastTimestamp() (int64, bool)          { return 0, false }
