package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gflink/gflink/savepoint"
	"pgregory.net/rapid"
)

// The tests below drive the coordinator with small scripts, in the spirit
// of etcd raft's interaction tests. A line "> verb args" is an event; the
// lines after it, up to the next event, are the actions it must return, in
// order, rendered by render. An expected line ending in "..." matches any
// line with that prefix. Times are written "@<duration>" after the start
// t0 and default to the previous event's time; time never goes backwards.
//
// Events:
//
//	new [interval=10s] [timeout=10m] [min-pause=0s] [max-concurrent=1]
//	    [tolerable=0] [retained=1] [after-finish=true] [next=1]
//	restored <id> [owned]             AddRestored
//	start @T <task>...                a task "3s" is source 3
//	tick @T
//	ack @T <id> <task> [snapshot]
//	decline @T <id> <task> [declined|async|trigger|expired]
//	finalized @T <id> [fail]
//	eoi @T <task>                     EndOfInput
//	finished @T <task> [final]        TaskFinished
//	suspend [suspending|failure|shutdown]
//	trigger @T checkpoint|savepoint|sync [tag]
//	stop @T [drain] [tag]               Stop (stop-with-savepoint)
//
// Queries (their output is compared like actions):
//
//	wakeup     "wakeup @<duration>" or "wakeup none"
//	latest     "latest <id>[/unowned]" or "latest none"
//	retained   "retained <id>[/unowned]..."
//	pending    one line "pending <id> <kind> awaiting=[...]" per pending
//	acks <id>  "acks <id>: <task>=<snapshot>..."
//	nextid     "nextid <id>"

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

type driver struct {
	t   testing.TB
	cfg Config
	c   *Coordinator
	now time.Time
	// every pending seen in an action, by id
	seen map[int64]*Pending
}

func newDriver(t testing.TB) *driver {
	d := &driver{t: t, now: t0, seen: map[int64]*Pending{}}
	d.configure(nil)
	return d
}

func (d *driver) configure(args []string) {
	cfg := Config{Interval: 10 * time.Second, Timeout: 10 * time.Minute, MaxConcurrent: 1, NumRetained: 1,
		AfterTasksFinish: true, Mode: ExactlyOnce}
	next := int64(1)
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			d.t.Fatalf("new: bad argument %q", a)
		}
		dur := func() time.Duration {
			x, err := time.ParseDuration(v)
			if err != nil {
				d.t.Fatalf("new: %s: %v", k, err)
			}
			return x
		}
		num := func() int {
			n, err := strconv.Atoi(v)
			if err != nil {
				d.t.Fatalf("new: %s: %v", k, err)
			}
			return n
		}
		switch k {
		case "interval":
			cfg.Interval = dur()
		case "timeout":
			cfg.Timeout = dur()
		case "min-pause":
			cfg.MinPause = dur()
		case "max-concurrent":
			cfg.MaxConcurrent = num()
		case "tolerable":
			cfg.TolerableFailed = num()
		case "retained":
			cfg.NumRetained = num()
		case "after-finish":
			cfg.AfterTasksFinish = v == "true"
		case "next":
			next = int64(num())
		case "unaligned":
			cfg.Unaligned = v == "true"
		default:
			d.t.Fatalf("new: unknown setting %q", k)
		}
	}
	d.cfg = cfg
	d.c = NewCoordinator(cfg, next)
}

func (d *driver) at(args []string) []string {
	var rest []string
	for _, a := range args {
		if strings.HasPrefix(a, "@") {
			off, err := time.ParseDuration(strings.TrimPrefix(a, "@"))
			if err != nil && a == "@0" {
				off, err = 0, nil
			}
			if err != nil {
				d.t.Fatalf("bad time %q: %v", a, err)
			}
			at := t0.Add(off)
			if at.Before(d.now) {
				d.t.Fatalf("time goes backwards: %s is before %s", a, d.rel(d.now))
			}
			d.now = at
			continue
		}
		rest = append(rest, a)
	}
	return rest
}

func (d *driver) rel(t time.Time) string { return "@" + t.Sub(t0).String() }

func atoi(t testing.TB, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func arg(args []string, i int, def string) string {
	if i < len(args) {
		return args[i]
	}
	return def
}

var reasons = map[string]error{
	"declined":   ErrDeclined,
	"async":      ErrAsyncFailed,
	"trigger":    ErrTriggerFailure,
	"expired":    ErrExpired,
	"suspending": ErrSuspending,
	"failure":    ErrTaskFailure,
	"shutdown":   ErrShutdown,
}

func reason(t testing.TB, name string) error {
	r, ok := reasons[name]
	if !ok {
		t.Fatalf("unknown reason %q", name)
	}
	return r
}

var kinds = map[string]savepoint.Kind{
	"checkpoint": savepoint.KindCheckpoint,
	"savepoint":  savepoint.KindSavepoint,
	"sync":       savepoint.KindSyncSavepoint,
}

// exec runs one event or query and returns its output lines.
func (d *driver) exec(line string) []string {
	f := strings.Fields(line)
	verb, args := f[0], d.at(f[1:])
	switch verb {
	case "new":
		d.configure(args)
		return nil
	case "restored":
		cp := &Completed{ID: atoi(d.t, args[0]), Owned: arg(args, 1, "") == "owned",
			Type: SnapshotType{Kind: savepoint.KindSavepoint, Format: savepoint.FormatCanonical}}
		d.c.AddRestored(cp)
		return nil
	case "start":
		var tasks []TaskInfo
		for _, a := range args {
			// 1s: task 1, a source; 3<1,2: task 3 reads from tasks 1 and 2.
			a, ups, _ := strings.Cut(a, "<")
			src := strings.HasSuffix(a, "s")
			ti := TaskInfo{ID: TaskID(atoi(d.t, strings.TrimSuffix(a, "s"))), Source: src}
			for _, u := range strings.Split(ups, ",") {
				if u != "" {
					ti.Upstream = append(ti.Upstream, TaskID(atoi(d.t, u)))
				}
			}
			tasks = append(tasks, ti)
		}
		d.c.Start(d.now, tasks)
		return nil
	case "tick":
		return d.render(d.c.Tick(d.now))
	case "ack":
		return d.render(d.c.Ack(d.now, atoi(d.t, args[0]), TaskID(atoi(d.t, args[1])), ackOf(arg(args, 2, "ack"))))
	case "decline":
		return d.render(d.c.Decline(d.now, atoi(d.t, args[0]), TaskID(atoi(d.t, args[1])),
			reason(d.t, arg(args, 2, "declined")), nil))
	case "finalized":
		var err error
		if arg(args, 1, "") == "fail" {
			err = errors.New("disk full")
		}
		id := atoi(d.t, args[0])
		return d.render(d.c.Finalized(d.now, id, handleOf(fmt.Sprintf("h%d", id)), err))
	case "eoi":
		return d.render(d.c.EndOfInput(d.now, TaskID(atoi(d.t, args[0]))))
	case "finished":
		var final *Ack
		if len(args) > 1 {
			final = ackOf(args[1])
		}
		return d.render(d.c.TaskFinished(d.now, TaskID(atoi(d.t, args[0])), final))
	case "suspend":
		return d.render(d.c.Suspend(reason(d.t, arg(args, 0, "suspending"))))
	case "trigger":
		kind, ok := kinds[args[0]]
		if !ok {
			d.t.Fatalf("trigger: unknown kind %q", args[0])
		}
		format := savepoint.FormatNative
		if kind != savepoint.KindCheckpoint {
			format = savepoint.FormatCanonical
		}
		req := &Request{Type: SnapshotType{Kind: kind, Format: format}, Tag: arg(args, 1, "req")}
		acts, err := d.c.Trigger(d.now, req)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		return d.render(acts)
	case "stop":
		drain := len(args) > 0 && args[0] == "drain"
		if drain {
			args = args[1:]
		}
		req := &Request{Type: SnapshotType{Kind: savepoint.KindSyncSavepoint, Format: savepoint.FormatCanonical, Drain: drain},
			Tag: arg(args, 0, "stop")}
		acts, err := d.c.Stop(d.now, req)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		return d.render(acts)
	case "wakeup":
		w, ok := d.c.NextWakeup()
		if !ok {
			return []string{"wakeup none"}
		}
		return []string{"wakeup " + d.rel(w)}
	case "latest":
		l := d.c.Latest()
		if l == nil {
			return []string{"latest none"}
		}
		return []string{"latest " + completedName(l)}
	case "retained":
		s := "retained"
		for _, cp := range d.c.Retained() {
			s += " " + completedName(cp)
		}
		return []string{s}
	case "pending":
		var out []string
		for _, p := range d.c.Pending() {
			out = append(out, fmt.Sprintf("pending %d %s awaiting=%v", p.ID, p.Type.Kind, p.Awaiting()))
		}
		return out
	case "acks":
		id := atoi(d.t, args[0])
		p, ok := d.seen[id]
		if !ok {
			d.t.Fatalf("acks: checkpoint %d never seen", id)
		}
		return []string{fmt.Sprintf("acks %d:%s", id, acksString(p.Acks))}
	case "nextid":
		return []string{fmt.Sprintf("nextid %d", d.c.NextID())}
	}
	d.t.Fatalf("unknown verb %q", verb)
	return nil
}

// ackOf is an acknowledgement the tests tell by its label (the uid of its
// one handle); handleOf a completed handle told by its directory.
func ackOf(label string) *Ack {
	return &Ack{Handles: map[string]savepoint.SubtaskState{label: {}}}
}

func labelOf(a *Ack) string {
	if a == nil {
		return "<nil>"
	}
	for uid := range a.Handles {
		return uid
	}
	return "?"
}

func handleOf(label string) *Handle { return &Handle{Loc: &Location{Dir: label}} }

func acksString(acks map[TaskID]*Ack) string {
	var ids []TaskID
	for t := range acks {
		ids = append(ids, t)
	}
	slices.Sort(ids)
	s := ""
	for _, t := range ids {
		s += fmt.Sprintf(" %d=%v", t, labelOf(acks[t]))
	}
	return s
}

func completedName(cp *Completed) string {
	s := strconv.FormatInt(cp.ID, 10)
	if !cp.Owned {
		s += "/unowned"
	}
	return s
}

func (d *driver) render(acts []Action) []string {
	var out []string
	for _, a := range acts {
		switch a := a.(type) {
		case TriggerTasks:
			d.seen[a.Pending.ID] = a.Pending
			out = append(out, fmt.Sprintf("trigger %d %s -> %v", a.Pending.ID, a.Pending.Type.Kind, a.Tasks))
		case Finalize:
			d.seen[a.Pending.ID] = a.Pending
			out = append(out, fmt.Sprintf("finalize %d", a.Pending.ID))
		case Abort:
			s := fmt.Sprintf("abort %d (%v)", a.Pending.ID, a.Err)
			if len(a.Tasks) > 0 {
				s += fmt.Sprintf(" -> %v", a.Tasks)
			}
			out = append(out, s)
		case Complete:
			s := fmt.Sprintf("complete %d %s notify=%v", a.Checkpoint.ID, a.Checkpoint.Type.Kind, a.Notify)
			if len(a.Subsumed) > 0 {
				var names []string
				for _, cp := range a.Subsumed {
					names = append(names, completedName(cp))
				}
				s += " subsumed=[" + strings.Join(names, " ") + "]"
			}
			if a.Request != nil {
				s += fmt.Sprintf(" req=%v", a.Request.Tag)
			}
			out = append(out, s)
		case FailJob:
			out = append(out, "failjob: "+a.Err.Error())
		case EndInput:
			out = append(out, fmt.Sprintf("endinput -> %v", a.Tasks))
		case RequestFailed:
			out = append(out, fmt.Sprintf("requestfailed %v (%v)", a.Request.Tag, a.Err))
		default:
			d.t.Fatalf("unknown action %T", a)
		}
	}
	return out
}

func matches(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if p, ok := strings.CutSuffix(want[i], "..."); ok {
			if !strings.HasPrefix(got[i], p) {
				return false
			}
		} else if got[i] != want[i] {
			return false
		}
	}
	return true
}

// run executes a script and fails at the first event whose output differs.
func (d *driver) run(script string) {
	d.t.Helper()
	type step struct {
		line int
		cmd  string
		want []string
	}
	var steps []step
	for i, raw := range strings.Split(script, "\n") {
		l := strings.TrimSpace(raw)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if c, _, ok := strings.Cut(l, " #"); ok {
			l = strings.TrimSpace(c)
		}
		if cmd, ok := strings.CutPrefix(l, ">"); ok {
			steps = append(steps, step{line: i + 1, cmd: strings.TrimSpace(cmd)})
			continue
		}
		if len(steps) == 0 {
			d.t.Fatalf("script line %d: output before any event: %q", i+1, l)
		}
		steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
	}
	for _, s := range steps {
		got := d.exec(s.cmd)
		if !matches(got, s.want) {
			d.t.Fatalf("script line %d: > %s\ngot:\n\t%s\nwant:\n\t%s", s.line, s.cmd,
				strings.Join(got, "\n\t"), strings.Join(s.want, "\n\t"))
		}
	}
}

func runScript(t *testing.T, script string) {
	t.Helper()
	newDriver(t).run(script)
}

const exceeded = "failjob: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to "

func TestPeriodicTriggerAckFinalizeComplete(t *testing.T) {
	runScript(t, `
		> start @0 1s 2 3
		> wakeup
		wakeup @10s
		> tick @9.999s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]   # only the source gets the trigger
		> pending
		pending 1 CHECKPOINT awaiting=[1 2 3]
		> ack @11s 1 1 a1
		> ack 1 3 a3
		> pending
		pending 1 CHECKPOINT awaiting=[2]
		> ack 1 2 a2
		finalize 1
		> acks 1
		acks 1: 1=a1 2=a2 3=a3
		> latest
		latest none
		> finalized @12s 1
		complete 1 CHECKPOINT notify=[1 2 3]
		> latest
		latest 1
		> pending
		> wakeup
		wakeup @20s                   # one interval after the previous trigger
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> nextid
		nextid 3
	`)
}

func TestSeveralSourcesAllTriggered(t *testing.T) {
	runScript(t, `
		> start @0 4 2s 3 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1 2]
		> pending
		pending 1 CHECKPOINT awaiting=[1 2 3 4]
	`)
}

func TestCompletedResultFields(t *testing.T) {
	d := newDriver(t)
	d.run(`
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack @13s 1 1
		finalize 1
	`)
	acts := d.c.Finalized(t0.Add(15*time.Second), 1, handleOf("handle"), nil)
	if len(acts) != 1 {
		t.Fatalf("actions %v", acts)
	}
	c, ok := acts[0].(Complete)
	if !ok {
		t.Fatalf("got %T", acts[0])
	}
	cp := c.Checkpoint
	if cp.ID != 1 || !cp.Owned || cp.Handle.Loc.Dir != "handle" || cp.Type.Kind != savepoint.KindCheckpoint ||
		!cp.Triggered.Equal(t0.Add(10*time.Second)) || !cp.Completed.Equal(t0.Add(15*time.Second)) || c.Request != nil {
		t.Fatalf("completed %+v, request %v", cp, c.Request)
	}
	if d.c.Latest() != cp {
		t.Fatalf("Latest() = %v, want the completed checkpoint", d.c.Latest())
	}
}

func TestIDsStartAtNextID(t *testing.T) {
	runScript(t, `
		> new next=42
		> nextid
		nextid 42
		> start @0 1s
		> tick @10s
		trigger 42 CHECKPOINT -> [1]
		> ack 42 1
		finalize 42
		> finalized 42
		complete 42 CHECKPOINT notify=[1]
		> tick @20s
		trigger 43 CHECKPOINT -> [1]
	`)
}

func TestNonPositiveNextIDStartsAtOne(t *testing.T) {
	if got := NewCoordinator(Config{Interval: time.Second}, 0).NextID(); got != 1 {
		t.Fatalf("NextID() = %d, want 1", got)
	}
	if got := NewCoordinator(Config{Interval: time.Second}, -5).NextID(); got != 1 {
		t.Fatalf("NextID() = %d, want 1", got)
	}
}

func TestAddRestoredSetsNextIDAndIsSubsumed(t *testing.T) {
	runScript(t, `
		> new next=8
		> restored 7
		> nextid
		nextid 8
		> latest
		latest 7/unowned
		> start @0 1s
		> tick @10s
		trigger 8 CHECKPOINT -> [1]
		> ack 8 1
		finalize 8
		> finalized 8
		complete 8 CHECKPOINT notify=[1] subsumed=[7/unowned]
		> retained
		retained 8
	`)
	// A restored id at or beyond nextID moves nextID past it.
	runScript(t, `
		> new next=3
		> restored 10 owned
		> nextid
		nextid 11
		> latest
		latest 10
	`)
	// A restored id below nextID leaves it.
	runScript(t, `
		> new next=20
		> restored 10
		> nextid
		nextid 20
	`)
}

func TestMaxConcurrentDefaultOne(t *testing.T) {
	runScript(t, `
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> tick @20s                    # 1 is still pending
		> tick @30s
		# Nothing can be triggered until 1 ends: only its timeout is due.
		# (Announcing the overdue periodic time would make the edge spin.)
		> wakeup
		wakeup @10m10s
		> ack @35s 1 1
		finalize 1
		> wakeup
		wakeup @10m10s
		> finalized 1
		complete 1 CHECKPOINT notify=[1]
		# The periodic trigger is overdue: due at once.
		> wakeup
		wakeup @20s
		> tick
		trigger 2 CHECKPOINT -> [1]
		> wakeup
		wakeup @10m35s
	`)
}

func TestMaxConcurrentTwo(t *testing.T) {
	runScript(t, `
		> new max-concurrent=2
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> wakeup
		wakeup @20s
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> wakeup
		wakeup @10m10s
		> tick @30s
		> ack @31s 2 1
		finalize 2
		> finalized 2
		complete 2 CHECKPOINT notify=[1]
		abort 1 (Checkpoint has been subsumed.) -> [1]
		> tick
		trigger 3 CHECKPOINT -> [1]
	`)
}

func TestMinPauseFromLastCompletion(t *testing.T) {
	runScript(t, `
		> new min-pause=15s
		> start @0 1s
		> wakeup
		wakeup @10s                    # no completion yet: no pause
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack @18s 1 1
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1]
		# The interval says 20s, but the pause runs from the completion at 18s.
		> wakeup
		wakeup @33s
		> tick @20s
		> tick @32.999s
		> tick @33s
		trigger 2 CHECKPOINT -> [1]
		> ack @34s 2 1
		finalize 2
		> finalized 2
		complete 2 CHECKPOINT notify=[1] subsumed=[1]
		> wakeup
		wakeup @49s
		> tick @48s
		> tick @49s
		trigger 3 CHECKPOINT -> [1]
	`)
}

func TestMinPauseShorterThanIntervalChangesNothing(t *testing.T) {
	runScript(t, `
		> new min-pause=2s
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack @11s 1 1
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1]
		> wakeup
		wakeup @20s
	`)
}

func TestDisabledCheckpointingNeverTriggers(t *testing.T) {
	runScript(t, `
		> new interval=0s
		> start @0 1s 2
		> wakeup
		wakeup none
		> tick @1h
		> eoi 1
		> eoi 2
		> wakeup
		wakeup none
	`)
}

func TestExpiry(t *testing.T) {
	runScript(t, `
		> new timeout=30s tolerable=5
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> wakeup
		wakeup @40s
		> tick @39.999s
		> tick @40s
		abort 1 (Checkpoint expired before completing.) -> [1 2]
		trigger 2 CHECKPOINT -> [1]    # the periodic trigger was overdue
		> ack 1 1                      # late
		> ack 1 2
	`)
}

func TestToleranceThreshold(t *testing.T) {
	runScript(t, `
		> new timeout=30s tolerable=1
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> tick @40s
		abort 1 (Checkpoint expired before completing.) -> [1]
		trigger 2 CHECKPOINT -> [1]
		> tick @70s
		abort 2 (Checkpoint expired before completing.) -> [1]
		failjob: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Checkpoint expired before completing., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.
		# No trigger after FailJob: the edge fails over right away.
		> pending
		> suspend failure
		> start @71s 1s
		> tick @81s
		trigger 3 CHECKPOINT -> [1]
		# As Flink, the count started over when the job was failed: one
		# expiry is tolerated again.
		> tick @111s
		abort 3 (Checkpoint expired before completing.) -> [1]
		trigger 4 CHECKPOINT -> [1]
		> tick @141s
		abort 4 (Checkpoint expired before completing.) -> [1]
		failjob: Exceeded ...
	`)
}

func TestToleranceZeroFailsOnFirstCountedFailure(t *testing.T) {
	runScript(t, `
		> new timeout=30s
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> tick @40s
		abort 1 (Checkpoint expired before completing.) -> [1]
		failjob: Exceeded ...
	`)
}

func TestCompletionResetsFailureCount(t *testing.T) {
	runScript(t, `
		> new timeout=30s tolerable=1
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> tick @40s
		abort 1 (Checkpoint expired before completing.) -> [1]
		trigger 2 CHECKPOINT -> [1]
		> ack 2 1
		finalize 2
		> finalized 2
		complete 2 CHECKPOINT notify=[1]
		> tick @50s
		trigger 3 CHECKPOINT -> [1]
		> tick @80s
		abort 3 (Checkpoint expired before completing.) -> [1]
		trigger 4 CHECKPOINT -> [1]
		> tick @110s
		abort 4 (Checkpoint expired before completing.) -> [1]
		failjob: Exceeded ...
	`)
}

func TestCountedAndUncountedFailures(t *testing.T) {
	runScript(t, `
		> new tolerable=0
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> decline 1 2 declined
		abort 1 (Checkpoint was declined.) -> [1 2]
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> decline 2 1 trigger
		abort 2 (Trigger checkpoint failure.) -> [1 2]
		> tick @30s
		trigger 3 CHECKPOINT -> [1]
		> decline 3 2 async
		abort 3 (Asynchronous task checkpoint failed.) -> [1 2]
		failjob: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Asynchronous task checkpoint failed., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.
	`)
	runScript(t, `
		> new tolerable=0
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1
		finalize 1
		> finalized 1 fail
		abort 1 (Failure to finalize checkpoint. disk full) -> [1]
		failjob: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Failure to finalize checkpoint., view ...
	`)
}

func TestSubsumptionDoesNotCount(t *testing.T) {
	runScript(t, `
		> new tolerable=0 max-concurrent=3
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> tick @30s
		trigger 3 CHECKPOINT -> [1]
		> ack 3 1
		finalize 3
		> finalized 3
		complete 3 CHECKPOINT notify=[1]
		abort 1 (Checkpoint has been subsumed.) -> [1]
		abort 2 (Checkpoint has been subsumed.) -> [1]
		> ack 1 1                      # late acks of subsumed checkpoints
		> ack 2 1
		> finalized 2
	`)
}

func TestSavepointFailuresNeverFailTheJob(t *testing.T) {
	runScript(t, `
		> new interval=1h timeout=30s tolerable=0
		> start @0 1s
		> trigger @1s savepoint sp1
		trigger 1 SAVEPOINT -> [1]
		> tick @31s
		abort 1 (Checkpoint expired before completing.) -> [1]
		> trigger savepoint sp2
		trigger 2 SAVEPOINT -> [1]
		> decline 2 1 async
		abort 2 (Asynchronous task checkpoint failed.) -> [1]
		> trigger sync sp3
		trigger 3 SYNC_SAVEPOINT -> [1]
		> ack 3 1
		finalize 3
		> finalized 3 fail
		abort 3 (Failure to finalize checkpoint. disk full) -> [1]
	`)
}

func TestNumRetained(t *testing.T) {
	runScript(t, `
		> new retained=2
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1]
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> ack 2 1
		finalize 2
		> finalized 2
		complete 2 CHECKPOINT notify=[1]
		> retained
		retained 1 2
		> tick @30s
		trigger 3 CHECKPOINT -> [1]
		> ack 3 1
		finalize 3
		> finalized 3
		complete 3 CHECKPOINT notify=[1] subsumed=[1]
		> retained
		retained 2 3
		> latest
		latest 3
	`)
}

func TestRestoredSavepointSubsumedButNotOwned(t *testing.T) {
	d := newDriver(t)
	d.run(`
		> new retained=2 next=6
		> restored 5
		> start @0 1s
		> tick @10s
		trigger 6 CHECKPOINT -> [1]
		> ack 6 1
		finalize 6
		> finalized 6
		complete 6 CHECKPOINT notify=[1]
		> retained
		retained 5/unowned 6
		> tick @20s
		trigger 7 CHECKPOINT -> [1]
		> ack 7 1
		finalize 7
	`)
	acts := d.c.Finalized(t0.Add(21*time.Second), 7, handleOf("h7"), nil)
	c := acts[0].(Complete)
	if len(c.Subsumed) != 1 || c.Subsumed[0].ID != 5 || c.Subsumed[0].Owned {
		t.Fatalf("subsumed %+v, want the restored 5 with Owned=false", c.Subsumed)
	}
}

func TestSavepointsIgnoreLimitsAndAreNotRetained(t *testing.T) {
	runScript(t, `
		> new min-pause=1m
		> start @0 1s 2
		# Before the first interval, with nothing completed.
		> trigger @1s savepoint sp
		trigger 1 SAVEPOINT -> [1]
		# A savepoint does not hold up periodic checkpoints.
		> tick @10s
		trigger 2 CHECKPOINT -> [1]
		# Nor do the interval or max-concurrent (1) hold up a savepoint.
		> trigger @11s savepoint sp2
		trigger 3 SAVEPOINT -> [1]
		> ack 3 1
		> ack 3 2
		finalize 3
		> finalized 3
		complete 3 SAVEPOINT notify=[] req=sp2
		# Completing savepoint 3 subsumes nothing and is not for recovery.
		> pending
		pending 1 SAVEPOINT awaiting=[1 2]
		pending 2 CHECKPOINT awaiting=[1 2]
		> latest
		latest none
		> retained
		retained
		> ack 2 1
		> ack 2 2
		finalize 2
		> finalized @12s 2
		complete 2 CHECKPOINT notify=[1 2]
		# A newer checkpoint does not subsume an older savepoint.
		> pending
		pending 1 SAVEPOINT awaiting=[1 2]
		# min-pause does not apply to savepoints either.
		> trigger @13s savepoint sp3
		trigger 4 SAVEPOINT -> [1]
		> retained
		retained 2
	`)
}

func TestSynchronousSavepointNotifies(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> trigger @1s sync stop
		trigger 1 SYNC_SAVEPOINT -> [1]
		> ack 1 1
		> ack 1 2
		finalize 1
		> finalized 1
		complete 1 SYNC_SAVEPOINT notify=[1 2] req=stop
		> latest
		latest none
	`)
}

func TestManualCheckpointIsRetained(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> trigger @1s checkpoint manual
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1
		> ack 1 2
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1 2] req=manual
		> latest
		latest 1
	`)
}

func TestTriggerErrors(t *testing.T) {
	runScript(t, `
		> new after-finish=false
		> trigger @0 savepoint
		error: the job is not running
		> start @0 1s 2
		> eoi @1s 1
		> trigger savepoint
		error: Not all required tasks are currently running.
		> trigger checkpoint
		error: Not all required tasks are currently running.
		> suspend
		> trigger savepoint
		error: the job is not running
	`)
	// With checkpoints-after-tasks-finish (the default), a user's snapshot
	// is taken with ended and finished tasks too (FLIP-147): ended tasks
	// are triggered directly, finished ones give their final snapshot.
	runScript(t, `
		> start @0 1s 2 3
		> eoi @1s 2
		> finished @1s 3 f3
		> trigger savepoint
		trigger 1 SAVEPOINT -> [1 2]
		> acks 1
		acks 1: 3=f3
	`)
	c := NewCoordinator(Config{Interval: time.Second, AfterTasksFinish: true}, 1)
	c.Start(t0, []TaskInfo{{ID: 1, Source: true}, {ID: 2}})
	c.EndOfInput(t0, 2)
	_, err := c.Trigger(t0, &Request{Type: SnapshotType{Kind: savepoint.KindSavepoint}})
	if err != nil {
		t.Fatalf("with checkpoints-after-tasks-finish, a savepoint after a task ended: %v", err)
	}
	c = NewCoordinator(Config{Interval: time.Second}, 1)
	c.Start(t0, []TaskInfo{{ID: 1, Source: true}, {ID: 2}})
	c.EndOfInput(t0, 2)
	_, err = c.Trigger(t0, &Request{Type: SnapshotType{Kind: savepoint.KindSavepoint}})
	if !errors.Is(err, ErrNotAllRunning) {
		t.Fatalf("err %v is not ErrNotAllRunning", err)
	}
	c.Suspend(ErrSuspending)
	if _, err := c.Trigger(t0, &Request{Type: SnapshotType{Kind: savepoint.KindSavepoint}}); !errors.Is(err, ErrNoRunningJob) {
		t.Fatalf("err %v is not ErrNoRunningJob", err)
	}
}

func TestEndOfInputTriggersTaskDirectly(t *testing.T) {
	runScript(t, `
		> start @0 1s 2 3 4
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1
		> ack 1 2
		# 2 acked already: it needs no trigger.
		> eoi @11s 2
		# 3 has not acked: no barrier can reach it in-band any more.
		> eoi 3
		trigger 1 CHECKPOINT -> [3]
		> eoi 3                        # a duplicate changes nothing
		> ack 1 3
		> ack 1 4
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1 2 3 4]
		# Later checkpoints go to sources and to tasks whose input ended.
		> tick @20s
		trigger 2 CHECKPOINT -> [1 2 3]
	`)
}

// TestTriggerTasksWhoseUpstreamFinished: a running task whose upstream
// tasks have all finished gets no barrier in-band; an unaligned checkpoint
// triggers it directly (FLIP-147), both later ones and, for one in
// progress, when its last upstream task finishes. Aligned ones (a
// savepoint) wait for its end of input, as before.
func TestTriggerTasksWhoseUpstreamFinished(t *testing.T) {
	runScript(t, `
		> new unaligned=true
		> start @0 1s 2s 3<1,2 4<3
		> tick @10s
		trigger 1 CHECKPOINT -> [1 2]
		> ack 1 1 a1
		> eoi @11s 1
		> finished 1 a1
		# 2 is still running: 3 will get the barrier from it.
		> ack 1 2 a2
		> eoi 2
		> ack 1 3
		> ack 1 4
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[2 3 4]
		# 2 finishes while 2 is in progress and 3 has not had its barrier:
		# none can come now.
		> tick @20s
		trigger 2 CHECKPOINT -> [2]
		> finished @21s 2 a2
		trigger 2 CHECKPOINT -> [3]
		> ack 2 3
		> ack 2 4
		finalize 2
		> finalized 2
		complete 2 CHECKPOINT notify=[3 4] subsumed=[1]
		# Later checkpoints go to 3 directly, not to 4 (3 runs).
		> tick @30s
		trigger 3 CHECKPOINT -> [3]
		> ack 3 3
		> ack 3 4
		finalize 3
		> finalized 3
		complete 3 CHECKPOINT notify=[3 4] subsumed=[2]
		# A savepoint is aligned: 3 gets it when its input ends.
		> trigger @31s savepoint sp4
		trigger 4 SAVEPOINT -> []
		> eoi 3
		trigger 4 SAVEPOINT -> [3]
	`)
}

func TestEndOfInputOfSourceAlreadyTriggered(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		# The source got the trigger already.
		> eoi @11s 1
	`)
}

func TestFinalCheckpointImmediately(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> eoi @3s 1
		# The last end of input triggers the final checkpoint at once.
		> eoi @4s 2
		trigger 1 CHECKPOINT -> [1 2]
		> wakeup
		wakeup @10m4s
		> ack 1 1
		> ack 1 2
		finalize 1
		> finalized @5s 1
		complete 1 CHECKPOINT notify=[1 2]
		# The final checkpoint is done: no other is due until the interval.
		> wakeup
		wakeup @10s
		> tick @6s
		> finished 1 f1
		> finished 2 f2
		# Every task finished: nothing left to checkpoint.
		> wakeup
		wakeup none
		> tick @1h
	`)
}

func TestFinalCheckpointWaitsForPendingSlot(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1
		> eoi @11s 1
		> eoi @12s 2
		trigger 1 CHECKPOINT -> [2]
		# Checkpoint 1 holds the only slot; the final one comes after it.
		> wakeup
		wakeup @10m10s
		> ack 1 2
		finalize 1
		> finalized @13s 1
		complete 1 CHECKPOINT notify=[1 2]
		# Source 1 acked 1 before its input ended: 1 cannot be final.
		> wakeup
		wakeup @12s
		> tick @13s
		trigger 2 CHECKPOINT -> [1 2]
		> ack 2 1
		> ack 2 2
		finalize 2
		> finalized 2
		complete 2 CHECKPOINT notify=[1 2] subsumed=[1]
		# The final checkpoint does not move the periodic schedule.
		> wakeup
		wakeup @20s
	`)
}

// A failed final checkpoint is retried, but only after the interval: it
// used to be retried at once, in a tight loop (964 failed checkpoints in
// under a second once the input ended, issue 8).
func TestFinalCheckpointRetriedAfterFailure(t *testing.T) {
	runScript(t, `
		> new tolerable=10
		> start @0 1s
		> eoi @1s 1
		trigger 1 CHECKPOINT -> [1]
		> decline @2s 1 1 declined
		abort 1 (Checkpoint was declined.) -> [1]
		> wakeup
		wakeup @12s
		> tick @2s
		> tick @11999ms
		> tick @12s
		trigger 2 CHECKPOINT -> [1]
		# Every retry waits again, whatever the reason of the failure.
		> ack @13s 2 1
		finalize 2
		> finalized @13s 2 fail
		abort 2 (Failure to finalize checkpoint. ...
		> wakeup
		wakeup @23s
		> tick @23s
		trigger 3 CHECKPOINT -> [1]
		> ack @24s 3 1
		finalize 3
		> finalized 3
		complete 3 CHECKPOINT notify=[1]
		# Back to the periodic schedule, which the final checkpoints did
		# not move.
		> wakeup
		wakeup @10s
	`)
}

// The min-pause, when longer than the interval, spaces retries too.
func TestFinalCheckpointRetryWaitsForMinPause(t *testing.T) {
	runScript(t, `
		> new interval=1s min-pause=1m tolerable=10
		> start @0 1s
		> eoi @1s 1
		trigger 1 CHECKPOINT -> [1]
		> decline @2s 1 1 async
		abort 1 (Asynchronous task checkpoint failed.) -> [1]
		> wakeup
		wakeup @1m2s
		> tick @1m1s
		> tick @1m2s
		trigger 2 CHECKPOINT -> [1]
	`)
}

// An expired final checkpoint is retried after the interval as well.
func TestFinalCheckpointRetryAfterExpiry(t *testing.T) {
	runScript(t, `
		> new interval=5s timeout=3s tolerable=10
		> start @0 1s
		> eoi @1s 1
		trigger 1 CHECKPOINT -> [1]
		> tick @4s
		abort 1 (Checkpoint expired before completing.) -> [1]
		> wakeup
		wakeup @9s
		> tick @9s
		trigger 2 CHECKPOINT -> [1]
	`)
}

// Without periodic checkpointing, the final checkpoint a failed stop
// --drain leaves due is retried after a second, not in a loop.
func TestFinalCheckpointRetryWithoutInterval(t *testing.T) {
	runScript(t, `
		> new interval=0s tolerable=10
		> start @0 1s
		> stop @1s drain
		endinput -> [1]
		> eoi @2s 1
		trigger 1 SYNC_SAVEPOINT -> [1]
		> decline @3s 1 1 declined
		abort 1 (Checkpoint was declined.) -> [1]
		# The task waits for a final checkpoint: the first goes at once.
		> wakeup
		wakeup @2s
		> tick @3s
		trigger 2 CHECKPOINT -> [1]
		> decline @3s 2 1 declined
		abort 2 (Checkpoint was declined.) -> [1]
		> wakeup
		wakeup @4s
		> tick @3500ms
		> tick @4s
		trigger 3 CHECKPOINT -> [1]
	`)
}

// A checkpoint already past its timeout is not sent to a task whose input
// ended: the Tick in the same EndOfInput aborts it.
func TestEndOfInputDoesNotTriggerExpiredCheckpoint(t *testing.T) {
	runScript(t, `
		> new interval=1s timeout=3s tolerable=5
		> start @0 1s 2
		> tick @1s
		trigger 1 CHECKPOINT -> [1]
		> eoi @2s 1
		> eoi @4s 2
		abort 1 (Checkpoint expired before completing.) -> [1 2]
		trigger 2 CHECKPOINT -> [1 2]
	`)
}

func TestRetire(t *testing.T) {
	d := newDriver(t)
	d.run(`
		> new retained=2 next=4
		> restored 3
		> start @0 1s
		> tick @10s
		trigger 4 CHECKPOINT -> [1]
		> ack 4 1
		finalize 4
		> finalized 4
		complete 4 CHECKPOINT notify=[1]
	`)
	got := d.c.Retire()
	if len(got) != 2 || got[0].ID != 3 || got[0].Owned || got[1].ID != 4 || !got[1].Owned {
		t.Fatalf("Retire() = %v", got)
	}
	d.run(`
		> retained
		retained
		> latest
		latest none
	`)
}

func TestFinalCheckpointIgnoresMinPause(t *testing.T) {
	runScript(t, `
		> new min-pause=1m
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1]
		> eoi @11s 1
		trigger 2 CHECKPOINT -> [1]
	`)
}

func TestNoCheckpointsAfterTasksFinishDisabled(t *testing.T) {
	runScript(t, `
		> new after-finish=false
		> start @0 1s 2
		> eoi @1s 1
		> eoi @2s 2                    # no final checkpoint
		> tick @10s
		trigger 1 CHECKPOINT -> [1 2]
		> ack 1 1
		> ack 1 2
		finalize 1
		> finalized 1
		complete 1 CHECKPOINT notify=[1 2]
		> finished @11s 1
		# A task has finished: no checkpoint will be triggered.
		> wakeup
		wakeup none
		> tick @20s
		> tick @1h
	`)
}

func TestAfterTasksFinishDisabledDuringPending(t *testing.T) {
	runScript(t, `
		> new after-finish=false
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		# Task 2 exits without a snapshot (nothing waits for a final one):
		# checkpoint 1 cannot hold its state, so it is declined rather than
		# completed without it.
		> finished @11s 2
		abort 1 (Checkpoint was declined (task is closing)) -> [1]
		> ack 1 1
		> wakeup
		wakeup none
	`)
}

func TestTaskFinishedFillsAcks(t *testing.T) {
	runScript(t, `
		> start @0 1s 2 3
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 1 a1
		> ack 1 2 a2
		# 3 finishes with its last snapshot: that is its part of 1.
		> finished @11s 3 f3
		finalize 1
		> acks 1
		acks 1: 1=a1 2=a2 3=f3
		> finalized 1
		complete 1 CHECKPOINT notify=[1 2]
		# Later checkpoints take the final snapshot too, and do not wait for 3.
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> pending
		pending 2 CHECKPOINT awaiting=[1 2]
		> acks 2
		acks 2: 3=f3
		> ack 2 1 b1
		> finished 2                   # finished without a snapshot: 2 cannot complete
		abort 2 (Checkpoint was declined (task is closing)) -> [1]
	`)
}

func TestTaskFinishedDoesNotReplaceAck(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 2 a2
		> finished 2 f2
		> ack 1 1 a1
		finalize 1
		> acks 1
		acks 1: 1=a1 2=a2
		> finished 2 again              # duplicate
	`)
}

func TestSuspend(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> trigger @11s savepoint sp
		trigger 2 SAVEPOINT -> [1]
		> suspend failure
		abort 1 (Task has failed.)
		abort 2 (Task has failed.)
		> pending
		> wakeup
		wakeup none
		> tick @1h
		> ack 1 1
		> ack 1 2
		> ack 2 1
		> ack 2 2
		> finalized 1
		> eoi 1
		> eoi 2
		> tick @2h
		> start @3h 1s 2
		> wakeup
		wakeup @3h0m10s
		> tick @3h0m10s
		trigger 3 CHECKPOINT -> [1]
	`)
}

func TestLateAndDuplicateEventsIgnored(t *testing.T) {
	runScript(t, `
		> ack @0 1 1                   # before start
		> decline 1 1
		> finalized 1
		> eoi 1
		> finished 1 x
		> start @0 1s 2
		> ack 99 1
		> decline 99 1 async
		> finalized 99
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> ack 1 7                      # not a task of this attempt
		> eoi 7
		> finished 7 x
		> pending
		pending 1 CHECKPOINT awaiting=[1 2]
		> ack 1 1
		> ack 1 1                      # duplicate
		> ack 1 2
		finalize 1
		> ack 1 2
		> finalized 1
		complete 1 CHECKPOINT notify=[1 2]
		> finalized 1
		> ack 1 1
		> decline 1 1 async
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> decline 2 2
		abort 2 (Checkpoint was declined.) -> [1 2]
		> decline 2 2
		> decline 2 1 async
		> finalized 2
		> ack 2 1
	`)
}

// The Tick that expires a checkpoint processes every overdue one.
func TestSeveralExpireInOneTick(t *testing.T) {
	runScript(t, `
		> new max-concurrent=2 timeout=1m tolerable=5
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> tick @20s
		trigger 2 CHECKPOINT -> [1]
		> tick @5m
		abort 1 (Checkpoint expired before completing.) -> [1]
		abort 2 (Checkpoint expired before completing.) -> [1]
		trigger 3 CHECKPOINT -> [1]
	`)
}

func TestZeroTimeoutGetsDefault(t *testing.T) {
	runScript(t, `
		> new timeout=0s
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
		> wakeup
		wakeup @10m10s
		> tick @11s
	`)
}

func TestSuspendReasonIsReported(t *testing.T) {
	d := newDriver(t)
	d.run(`
		> start @0 1s
		> tick @10s
		trigger 1 CHECKPOINT -> [1]
	`)
	acts := d.c.Suspend(ErrSuspending)
	if len(acts) != 1 {
		t.Fatalf("actions %v", acts)
	}
	a := acts[0].(Abort)
	if !errors.Is(a.Err, ErrSuspending) || a.Err.Error() != "Checkpoint Coordinator is suspending." {
		t.Fatalf("abort error %v", a.Err)
	}
}

func TestFailureErrorText(t *testing.T) {
	cause := errors.New("boom")
	f := &Failure{Reason: ErrAsyncFailed, Cause: cause}
	if f.Error() != "Asynchronous task checkpoint failed. boom" {
		t.Fatalf("%q", f.Error())
	}
	if !errors.Is(f, ErrAsyncFailed) || !errors.Is(f, cause) {
		t.Fatal("Failure does not unwrap to its reason and cause")
	}
	if (&Failure{Reason: ErrExpired}).Error() != "Checkpoint expired before completing." {
		t.Fatal("reason-only text")
	}
}

// Each script should be deterministic: running it twice gives the same
// output (no map-order dependence in the actions).
func TestActionsAreDeterministic(t *testing.T) {
	script := []string{"start @0 5s 3s 1s 4 2", "tick @10s", "eoi @11s 4", "eoi 2", "ack 1 1", "ack 1 3",
		"ack 1 5", "ack 1 2", "ack 1 4", "finalized 1", "suspend"}
	var first []string
	for i := range 20 {
		d := newDriver(t)
		var out []string
		for _, l := range script {
			out = append(out, d.exec(l)...)
		}
		if i == 0 {
			first = out
			continue
		}
		if !slices.Equal(out, first) {
			t.Fatalf("run %d:\n%v\nfirst:\n%v", i, out, first)
		}
	}
}

// model drives a coordinator with random events, as the edge would, and
// checks its invariants after every step.
type model struct {
	rt      *rapid.T
	cfg     Config
	c       *Coordinator
	now     time.Time
	tasks   []TaskInfo
	state   map[TaskID]taskState
	running bool

	maxID      int64
	triggered  map[int64]bool
	finalizing map[int64]bool // Finalize seen, no outcome yet
	finalized  map[int64]bool // Finalize seen at all
	completed  map[int64]bool
	aborted    map[int64]bool
	lastDone   int64 // last completed checkpoint (not savepoint) id
}

func (m *model) live() []TaskID {
	var out []TaskID
	for _, t := range m.tasks {
		if m.state[t.ID] != taskFinished {
			out = append(out, t.ID)
		}
	}
	return out
}

func (m *model) isSource(id TaskID) bool {
	for _, t := range m.tasks {
		if t.ID == id {
			return t.Source
		}
	}
	return false
}

func (m *model) start() {
	m.state = map[TaskID]taskState{}
	for _, t := range m.tasks {
		m.state[t.ID] = taskRunning
	}
	m.running = true
	m.c.Start(m.now, m.tasks)
}

func (m *model) pendingByID(id int64) *Pending {
	for _, p := range m.c.Pending() {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// apply checks actions as the edge receives them and carries out the
// edge's side: a FailJob suspends the attempt and starts a new one.
func (m *model) apply(acts []Action) {
	rt := m.rt
	failed := false
	for _, a := range acts {
		switch a := a.(type) {
		case TriggerTasks:
			id := a.Pending.ID
			if m.pendingByID(id) != a.Pending {
				rt.Fatalf("trigger %d: not pending", id)
			}
			if !m.triggered[id] {
				if id <= m.maxID {
					rt.Fatalf("trigger %d after %d: ids must increase", id, m.maxID)
				}
				m.maxID = id
				m.triggered[id] = true
				if !slices.Equal(a.Pending.Awaiting(), m.live()) {
					rt.Fatalf("trigger %d awaits %v, live tasks %v", id, a.Pending.Awaiting(), m.live())
				}
			}
			for _, t := range a.Tasks {
				if s := m.state[t]; s == taskFinished || (s == taskRunning && !m.isSource(t)) {
					rt.Fatalf("trigger %d sent to task %d (state %d, source %v)", id, t, s, m.isSource(t))
				}
			}
		case Finalize:
			p := a.Pending
			if m.pendingByID(p.ID) != p {
				rt.Fatalf("finalize %d: not pending", p.ID)
			}
			if m.finalized[p.ID] {
				rt.Fatalf("finalize %d twice", p.ID)
			}
			if len(p.Awaiting()) != 0 {
				rt.Fatalf("finalize %d still awaiting %v", p.ID, p.Awaiting())
			}
			for _, t := range m.live() {
				if _, ok := p.Acks[t]; !ok {
					rt.Fatalf("finalize %d without an ack from live task %d (acks %v)", p.ID, t, p.Acks)
				}
			}
			m.finalized[p.ID] = true
			m.finalizing[p.ID] = true
		case Abort:
			id := a.Pending.ID
			if m.completed[id] || m.aborted[id] {
				rt.Fatalf("abort %d: completed %v, aborted %v before", id, m.completed[id], m.aborted[id])
			}
			if !m.triggered[id] {
				rt.Fatalf("abort %d: never triggered", id)
			}
			m.aborted[id] = true
			delete(m.finalizing, id)
		case Complete:
			cp := a.Checkpoint
			if m.completed[cp.ID] || m.aborted[cp.ID] {
				rt.Fatalf("complete %d: completed %v, aborted %v before", cp.ID, m.completed[cp.ID], m.aborted[cp.ID])
			}
			if !m.finalized[cp.ID] {
				rt.Fatalf("complete %d without Finalize", cp.ID)
			}
			m.completed[cp.ID] = true
			delete(m.finalizing, cp.ID)
			if cp.Type.IsSavepoint() {
				if cp.Owned || len(a.Subsumed) > 0 {
					rt.Fatalf("savepoint %d: owned %v, subsumed %v", cp.ID, cp.Owned, a.Subsumed)
				}
			} else {
				if cp.ID <= m.lastDone {
					rt.Fatalf("checkpoint %d completed after %d", cp.ID, m.lastDone)
				}
				m.lastDone = cp.ID
				for _, s := range a.Subsumed {
					if s.ID >= cp.ID {
						rt.Fatalf("checkpoint %d subsumes %d", cp.ID, s.ID)
					}
				}
			}
			wantNotify := m.live()
			if cp.Type.IsSavepoint() && !cp.Type.IsSynchronous() {
				wantNotify = nil
			}
			if !slices.Equal(a.Notify, wantNotify) {
				rt.Fatalf("complete %d notifies %v, want %v", cp.ID, a.Notify, wantNotify)
			}
		case FailJob:
			if !strings.HasPrefix(a.Err.Error(), "Exceeded checkpoint tolerable failure threshold.") {
				rt.Fatalf("FailJob %v", a.Err)
			}
			failed = true
		}
	}
	if failed && m.running {
		m.running = false
		m.apply(m.c.Suspend(ErrTaskFailure))
		m.start()
	}
}

// settle ticks while NextWakeup says something is due, as the edge's
// loop does; each such Tick must do something.
func (m *model) settle() {
	for range 20 {
		w, ok := m.c.NextWakeup()
		if !ok || w.After(m.now) {
			return
		}
		acts := m.c.Tick(m.now)
		if len(acts) == 0 {
			m.rt.Fatalf("NextWakeup %v is not after now %v, but Tick did nothing", w.Sub(t0), m.now.Sub(t0))
		}
		m.apply(acts)
	}
	m.rt.Fatalf("NextWakeup stays due after 20 Ticks")
}

func (m *model) check() {
	rt := m.rt
	periodic := 0
	for _, p := range m.c.Pending() {
		if p.Request == nil {
			periodic++
		}
		if m.completed[p.ID] || m.aborted[p.ID] {
			rt.Fatalf("checkpoint %d pending after it ended", p.ID)
		}
	}
	if periodic > m.cfg.MaxConcurrent {
		rt.Fatalf("%d periodic checkpoints pending, max %d", periodic, m.cfg.MaxConcurrent)
	}
	ret := m.c.Retained()
	if len(ret) > m.cfg.NumRetained {
		rt.Fatalf("%d checkpoints retained, max %d", len(ret), m.cfg.NumRetained)
	}
	for i := 1; i < len(ret); i++ {
		if ret[i].ID <= ret[i-1].ID {
			rt.Fatalf("retained out of order: %d, %d", ret[i-1].ID, ret[i].ID)
		}
	}
	if len(ret) > 0 && m.c.Latest() != ret[len(ret)-1] {
		rt.Fatalf("Latest is not the newest retained")
	}
	if w, ok := m.c.NextWakeup(); ok && w.Before(m.now) {
		rt.Fatalf("NextWakeup %v before now %v after settling", w.Sub(t0), m.now.Sub(t0))
	}
}

func TestCoordinatorProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ms := func(label string, choices ...int) time.Duration {
			return time.Duration(rapid.SampledFrom(choices).Draw(rt, label)) * time.Millisecond
		}
		cfg := Config{
			Interval:         ms("interval", 0, 1000, 5000, 10000, 30000),
			Timeout:          ms("timeout", 3000, 20000, 60000),
			MinPause:         ms("minPause", 0, 2000, 15000),
			MaxConcurrent:    rapid.IntRange(1, 3).Draw(rt, "maxConcurrent"),
			TolerableFailed:  rapid.IntRange(0, 2).Draw(rt, "tolerable"),
			NumRetained:      rapid.IntRange(1, 3).Draw(rt, "retained"),
			AfterTasksFinish: rapid.Bool().Draw(rt, "afterFinish"),
		}
		n := rapid.IntRange(1, 4).Draw(rt, "tasks")
		var tasks []TaskInfo
		for i := 1; i <= n; i++ {
			tasks = append(tasks, TaskInfo{ID: TaskID(i), Source: i == 1 || rapid.Bool().Draw(rt, "source")})
		}
		next := rapid.Int64Range(1, 50).Draw(rt, "nextID")
		m := &model{rt: rt, cfg: cfg, c: NewCoordinator(cfg, next), now: t0, tasks: tasks,
			maxID: next - 1, triggered: map[int64]bool{}, finalizing: map[int64]bool{}, finalized: map[int64]bool{},
			completed: map[int64]bool{}, aborted: map[int64]bool{}}
		m.start()
		anyTask := rapid.Custom(func(t *rapid.T) TaskID { return TaskID(rapid.IntRange(1, n+1).Draw(t, "task")) })
		pickPending := func() *Pending {
			ps := m.c.Pending()
			if len(ps) == 0 {
				return nil
			}
			return rapid.SampledFrom(ps).Draw(rt, "pending")
		}
		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for range steps {
			m.now = m.now.Add(ms("dt", 0, 0, 1, 500, 2000, 9000))
			switch rapid.IntRange(0, 10).Draw(rt, "op") {
			case 0: // tick at a random time: any work it does must have been announced
				m.now = m.now.Add(ms("tickDt", 1000, 10000, 40000))
				w, ok := m.c.NextWakeup()
				acts := m.c.Tick(m.now)
				if len(acts) > 0 && (!ok || w.After(m.now)) {
					rt.Fatalf("Tick at %v did %d actions, NextWakeup was %v %v", m.now.Sub(t0), len(acts), w.Sub(t0), ok)
				}
				m.apply(acts)
			case 1: // tick exactly at the announced wakeup: it must do something
				w, ok := m.c.NextWakeup()
				if !ok {
					break
				}
				if w.After(m.now) {
					m.now = w
				}
				acts := m.c.Tick(m.now)
				if len(acts) == 0 {
					rt.Fatalf("Tick at the announced wakeup %v did nothing", w.Sub(t0))
				}
				m.apply(acts)
			case 2, 3, 4: // ack, mostly from a task that owes one
				p := pickPending()
				if p == nil {
					break
				}
				task := anyTask.Draw(rt, "ackTask")
				if aw := p.Awaiting(); len(aw) > 0 && rapid.IntRange(0, 4).Draw(rt, "owed") > 0 {
					task = rapid.SampledFrom(aw).Draw(rt, "awaitingTask")
				}
				m.apply(m.c.Ack(m.now, p.ID, task, ackOf(fmt.Sprintf("s%d.%d", p.ID, task))))
			case 5: // decline
				p := pickPending()
				if p == nil {
					break
				}
				r := rapid.SampledFrom([]error{ErrDeclined, ErrAsyncFailed, ErrTriggerFailure}).Draw(rt, "reason")
				m.apply(m.c.Decline(m.now, p.ID, anyTask.Draw(rt, "declineTask"), r, nil))
			case 6: // finalize outcome
				var ids []int64
				for id := range m.finalizing {
					ids = append(ids, id)
				}
				if len(ids) == 0 {
					break
				}
				slices.Sort(ids)
				id := rapid.SampledFrom(ids).Draw(rt, "finalizing")
				var err error
				if rapid.IntRange(0, 4).Draw(rt, "finalizeFails") == 0 {
					err = errors.New("disk full")
				}
				m.apply(m.c.Finalized(m.now, id, handleOf(fmt.Sprint(id)), err))
			case 7: // end of input
				task := anyTask.Draw(rt, "eoiTask")
				if s, ok := m.state[task]; ok && s == taskRunning && m.running {
					m.state[task] = taskEndedInput
				}
				m.apply(m.c.EndOfInput(m.now, task))
			case 8: // task finished
				task := anyTask.Draw(rt, "finishedTask")
				var final *Ack
				if rapid.Bool().Draw(rt, "hasFinal") {
					final = ackOf(fmt.Sprintf("final%d", task))
				}
				if _, ok := m.state[task]; ok && m.running {
					m.state[task] = taskFinished
				}
				m.apply(m.c.TaskFinished(m.now, task, final))
			case 9: // user trigger
				kind := rapid.SampledFrom([]savepoint.Kind{savepoint.KindCheckpoint, savepoint.KindSavepoint, savepoint.KindSyncSavepoint}).Draw(rt, "kind")
				acts, err := m.c.Trigger(m.now, &Request{Type: SnapshotType{Kind: kind}})
				allRunning, live := true, false
				for _, s := range m.state {
					allRunning = allRunning && s == taskRunning
					live = live || s != taskFinished
				}
				switch {
				case !m.running || !live:
					if !errors.Is(err, ErrNoRunningJob) {
						rt.Fatalf("Trigger while not running: %v", err)
					}
				case !allRunning && !m.cfg.AfterTasksFinish:
					// Only without checkpoints-after-tasks-finish do ended
					// tasks block a user's snapshot.
					if !errors.Is(err, ErrNotAllRunning) {
						rt.Fatalf("Trigger with tasks ended: %v", err)
					}
				case err != nil:
					rt.Fatalf("Trigger: %v", err)
				}
				m.apply(acts)
			case 10: // the attempt fails and restarts, or late events arrive
				if rapid.Bool().Draw(rt, "restart") {
					m.running = false
					m.apply(m.c.Suspend(ErrTaskFailure))
					m.start()
					break
				}
				var ended []int64
				for id := range m.completed {
					ended = append(ended, id)
				}
				for id := range m.aborted {
					ended = append(ended, id)
				}
				ended = append(ended, m.maxID+100)
				slices.Sort(ended)
				id := rapid.SampledFrom(ended).Draw(rt, "lateID")
				task := anyTask.Draw(rt, "lateTask")
				for _, acts := range [][]Action{
					m.c.Ack(m.now, id, task, ackOf("late")),
					m.c.Decline(m.now, id, task, ErrAsyncFailed, nil),
					m.c.Finalized(m.now, id, nil, nil),
				} {
					if len(acts) > 0 {
						rt.Fatalf("late event for %d returned %d actions", id, len(acts))
					}
				}
			}
			m.settle()
			m.check()
		}
	})
}

func TestStopWithSavepoint(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		# A stop triggers a synchronous savepoint at once, at the sources.
		> stop @1s
		trigger 1 SYNC_SAVEPOINT -> [1]
		# No periodic checkpoint while the stop is in flight.
		> tick @10s
		> wakeup
		wakeup @10m1s
		> stop @10s
		error: a stop-with-savepoint is already in progress
		> ack 1 1
		> ack 1 2
		finalize 1
		# The synchronous savepoint notifies the tasks (sinks commit) but is
		# not retained for recovery.
		> finalized 1
		complete 1 SYNC_SAVEPOINT notify=[1 2] req=stop
		> latest
		latest none
	`)
}

func TestStopWithSavepointFailureResumes(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> stop @1s
		trigger 1 SYNC_SAVEPOINT -> [1]
		> decline @2s 1 2 async
		abort 1 (Asynchronous task checkpoint failed.) -> [1 2]
		# The job goes on: periodic checkpoints resume.
		> tick @10s
		trigger 2 CHECKPOINT -> [1]
	`)
}

func TestStopWithDrain(t *testing.T) {
	runScript(t, `
		> new interval=0s
		> start @0 1s 2
		# The sources end their input first; the savepoint waits for every
		# task to have ended its input, even without periodic checkpoints.
		> stop @1s drain
		endinput -> [1]
		> eoi @2s 1
		> wakeup
		wakeup none
		> eoi @3s 2
		trigger 1 SYNC_SAVEPOINT -> [1 2]
		> ack 1 1
		> ack 1 2
		finalize 1
		> finalized 1
		complete 1 SYNC_SAVEPOINT notify=[1 2] req=stop
	`)
}

func TestDrainInterruptedByFailure(t *testing.T) {
	runScript(t, `
		> start @0 1s 2
		> stop @1s drain
		endinput -> [1]
		> suspend failure
		requestfailed stop (Task has failed.)
	`)
}
