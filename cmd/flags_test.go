package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/gflink/gflink/engine/jobs"
	"github.com/spf13/cobra"
)

// parseOnly runs argv (args[0] is the action) the way Run does — argv
// normalised, global flags added, cobra's errors made Flink's — but with a
// runF that keeps the options instead of running the verb. It returns the
// options, or nil and the error when the command line was refused.
func parseOnly(t *testing.T, args ...string) (any, error) {
	t.Helper()
	io, _, _ := TestStreams()
	f := &Factory{IO: io, Registry: jobs.Builtin(), Getenv: func(string) string { return "" }, Context: context.Background()}
	g := &globalOptions{}
	var got any
	var c *cobra.Command
	switch args[0] {
	case "run":
		c = newRunCmd(f, g, keep[RunOptions](&got))
	case "list":
		c = newListCmd(f, g, keep[ListOptions](&got))
	case "stop":
		c = newStopCmd(f, g, keep[StopOptions](&got))
	case "cancel":
		c = newCancelCmd(f, g, keep[CancelOptions](&got))
	case "savepoint":
		c = newSavepointCmd(f, g, keep[SavepointOptions](&got))
	case "checkpoint":
		c = newCheckpointCmd(f, g, keep[CheckpointOptions](&got))
	case "checkpoints":
		c = newCheckpointsCmd(f, g, keep[CheckpointsOptions](&got))
	case "inspect":
		c = newInspectCmd(f, g, keep[InspectOptions](&got))
	default:
		t.Fatalf("no verb %q", args[0])
	}
	act, _ := lookupAction(args[0])
	return got, execute(f, act, c, g, args)
}

func keep[O any](got *any) func(*O) error {
	return func(o *O) error {
		*got = o
		return nil
	}
}

// TestFlagParsing checks, per verb, which options a command line gives —
// Flink's one-dash spellings, optional arguments, positional arguments —
// without running anything.
func TestFlagParsing(t *testing.T) {
	const id = "0123456789ABCDEF0123456789abcdef"
	global := func(g globalOptions) *globalOptions { return &g }
	client := func(g globalOptions, timeout string) clientOptions {
		return clientOptions{Global: &g, Timeout: timeout}
	}
	for _, tc := range []struct {
		args []string
		want any
	}{
		// run: everything after the job name is the job's, flags included.
		{[]string{"run", "wordcount"}, &RunOptions{Global: global(globalOptions{}), Job: "wordcount", Args: []string{}}},
		{[]string{"run", "-fromSavepoint", "/sp", "-allowNonRestoredState", "-cm", "claim", "wordcount", "--input", "a", "-p", "2"},
			&RunOptions{Global: global(globalOptions{}), Job: "wordcount", Args: []string{"--input", "a", "-p", "2"},
				FromSavepoint: "/sp", FromSavepointSet: true, AllowNonRestoredState: true, ClaimMode: "claim"}},
		{[]string{"run", "-s", "file:///sp", "-n", "-p", "4", "-rm", "legacy", "-sae", "-d", "--check", "wordcount"},
			&RunOptions{Global: global(globalOptions{}), Job: "wordcount", Args: []string{}, FromSavepoint: "file:///sp",
				FromSavepointSet: true, AllowNonRestoredState: true, Parallelism: "4", RestoreMode: "legacy",
				ShutdownOnExit: true, Detached: true, Check: true}},
		// -s '' is still -s: run refuses to start without the state a
		// script meant to restore.
		{[]string{"run", "-s", "", "wordcount"}, &RunOptions{Global: global(globalOptions{}), Job: "wordcount", Args: []string{}, FromSavepointSet: true}},
		{[]string{"run", "--fromSav=/sp", "-restoreMode", "claim", "wordcount"},
			&RunOptions{Global: global(globalOptions{}), Job: "wordcount", Args: []string{}, FromSavepoint: "/sp", FromSavepointSet: true, RestoreMode: "claim"}},
		// -D repeats accumulate, in order; the global options go to Global.
		{[]string{"run", "-D", "a=1", "-Db=2", "-D", "a=3", "--config-dir", "/conf", "-m", "host:1", "--token", "t", "-o", "json", "wordcount"},
			&RunOptions{Global: global(globalOptions{Dynamic: []string{"a=1", "b=2", "a=3"}, ConfigDir: "/conf", JobManager: "host:1", Token: "t", Output: "json"}),
				Job: "wordcount", Args: []string{}}},

		{[]string{"list"}, &ListOptions{clientOptions: client(globalOptions{}, "")}},
		{[]string{"list", "-a", "-r", "--scheduled", "--timeout", "5s"}, &ListOptions{clientOptions: client(globalOptions{}, "5s"), All: true, Running: true, Scheduled: true}},

		{[]string{"stop", id}, &StopOptions{clientOptions: client(globalOptions{}, ""), JobID: id}},
		{[]string{"stop", "-savepointPath", "/sp", "-drain", "-type", "native", "-detached", id},
			&StopOptions{clientOptions: client(globalOptions{}, ""), JobID: id, SavepointPath: "/sp", Drain: true, Type: "native", Detached: true}},
		// Flink's quirk: a lone value after -p is the job id.
		{[]string{"stop", "-p", id}, &StopOptions{clientOptions: client(globalOptions{}, ""), JobID: id}},
		{[]string{"stop", "-p", "-d", id}, &StopOptions{clientOptions: client(globalOptions{}, ""), JobID: id, Drain: true}},

		{[]string{"cancel", id}, &CancelOptions{clientOptions: client(globalOptions{}, ""), JobID: id}},
		{[]string{"cancel", "-s", "/sp", "-type", "NATIVE", id},
			&CancelOptions{clientOptions: client(globalOptions{}, ""), JobID: id, WithSavepoint: "/sp", WithSavepointSet: true, Type: "NATIVE"}},
		{[]string{"cancel", "-s", id}, &CancelOptions{clientOptions: client(globalOptions{}, ""), JobID: id, WithSavepointSet: true}},
		{[]string{"cancel", "-withSavepoint", id}, &CancelOptions{clientOptions: client(globalOptions{}, ""), JobID: id, WithSavepointSet: true}},

		{[]string{"savepoint", id}, &SavepointOptions{clientOptions: client(globalOptions{}, ""), JobID: id}},
		{[]string{"savepoint", id, "/sp", "extra", "-detached", "-type", "canonical", "-j", "x.jar"},
			&SavepointOptions{clientOptions: client(globalOptions{}, ""), JobID: id, Target: "/sp", Extra: true, Detached: true, Type: "canonical"}},
		{[]string{"savepoint", "-dispose", "/sp"}, &SavepointOptions{clientOptions: client(globalOptions{}, ""), Dispose: "/sp"}},
		{[]string{"savepoint", "-d", "/sp", id}, &SavepointOptions{clientOptions: client(globalOptions{}, ""), Dispose: "/sp"}},

		{[]string{"checkpoint", id}, &CheckpointOptions{clientOptions: client(globalOptions{}, ""), JobID: id}},
		{[]string{"checkpoint", "-full", id, "-o", "json"}, &CheckpointOptions{clientOptions: client(globalOptions{Output: "json"}, ""), JobID: id, Full: true}},

		{[]string{"checkpoints", "/ckpt"}, &CheckpointsOptions{clientOptions: client(globalOptions{}, ""), Target: "/ckpt"}},
		{[]string{"checkpoints", "-latest", id, "--timeout", "1m"}, &CheckpointsOptions{clientOptions: client(globalOptions{}, "1m"), Target: id, Latest: true}},

		{[]string{"inspect", "/ckpt/chk-3"}, &InspectOptions{Global: global(globalOptions{}), Path: "/ckpt/chk-3"}},
		{[]string{"inspect", "-D", "k=v", "file:/sp"}, &InspectOptions{Global: global(globalOptions{Dynamic: []string{"k=v"}}), Path: "file:/sp"}},
	} {
		got, err := parseOnly(t, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got %s\nwant %s", tc.args, show(got), show(tc.want))
		}
	}
}

// TestFlagErrors checks the command lines refused before a verb runs:
// usage errors (exit 2) in Flink's words.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "No job specified. Specify the name of a job (available: sessionize, windowwordcount, wordcount)."},
		{[]string{"run", "--nope", "wordcount"}, "Unrecognized option: --nope"},
		{[]string{"run", "-s"}, "Missing argument for option: s"},
		{[]string{"list", "extra"}, "Unexpected argument for list: extra. The list action takes only options (-r, -s, -a)."},
		{[]string{"stop"}, "Missing JobId"},
		{[]string{"stop", "--detached", "x"}, "Unrecognized option: --detached"},
		{[]string{"cancel"}, "Missing JobID. Specify a JobID to cancel a job."},
		{[]string{"cancel", "-s"}, "Missing JobID. Specify a JobID to cancel a job."},
		{[]string{"savepoint"}, "Missing JobID. Specify a Job ID to trigger a savepoint."},
		{[]string{"savepoint", "-d", ""}, "Missing argument for option: d"},
		{[]string{"checkpoint"}, "Missing JobID. Specify a Job ID to manipulate a checkpoint."},
		{[]string{"checkpoints"}, "Specify one job id or directory: gflink checkpoints <jobId | directory> [--latest]."},
		{[]string{"checkpoints", "a", "b"}, "Specify one job id or directory: gflink checkpoints <jobId | directory> [--latest]."},
		{[]string{"inspect"}, "Specify the snapshot to inspect: gflink inspect <path>."},
	} {
		got, err := parseOnly(t, tc.args...)
		var u *UsageError
		if !errors.As(err, &u) || err.Error() != tc.want {
			t.Errorf("%q: got options %s, error %v; want usage error %q", tc.args, show(got), err, tc.want)
		}
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
