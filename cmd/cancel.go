package cmd

import (
	"errors"
	"fmt"
	"time"

	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/rest"
	"github.com/spf13/cobra"
)

// CancelOptions are the options of `gflink cancel`.
type CancelOptions struct {
	clientOptions
	JobID         string
	WithSavepoint string
	// WithSavepointSet: -s was given, with or without a directory.
	WithSavepointSet bool
	Type             string
}

func newCancelCmd(f *Factory, g *globalOptions, runF func(*CancelOptions) error) *cobra.Command {
	o := &CancelOptions{clientOptions: clientOptions{Global: g}}
	c := &cobra.Command{
		Use:  "cancel",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.WithSavepointSet = c.Flags().Changed("withSavepoint")
			if !jobIDArg(args, o.WithSavepointSet, &o.WithSavepoint, &o.JobID) {
				return usageErrorf("Missing JobID. Specify a JobID to cancel a job.")
			}
			if runF != nil {
				return runF(o)
			}
			return runCancel(f, o)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&o.WithSavepoint, "withSavepoint", "s", "", `**DEPRECATION WARNING**: Cancelling a job with savepoint is deprecated. Use "stop" instead. Trigger savepoint and cancel job. The target directory is optional. If no directory is specified, the configured default directory (execution.checkpointing.savepoint-dir) is used.`)
	fl.SetAnnotation("withSavepoint", "argname", []string{"targetDirectory"})
	fl.StringVar(&o.Type, "type", "", "The savepoint format with -s: canonical or native.")
	fl.MarkHidden("type")
	addTimeoutFlag(c, &o.clientOptions)
	return c
}

func runCancel(f *Factory, o *CancelOptions) error {
	out, err := jobOutput(f, o.Global, &o.JobID)
	if err != nil {
		return err
	}
	s, err := connect(f, &o.clientOptions, o.JobID)
	var ended *jobEndedError
	if errors.As(err, &ended) && ended.State == "CANCELED" && !o.WithSavepointSet {
		// As in Flink, cancelling a cancelled job succeeds.
		out.println("Cancelling job %s.", o.JobID)
		out.println("Cancelled job %s.", o.JobID)
		out.result(map[string]string{"jobId": o.JobID, "status": ended.State})
		return nil
	}
	if err != nil {
		return err
	}
	defer s.cancel()
	if o.WithSavepointSet {
		format, err := formatType(o.Type)
		if err != nil {
			return err
		}
		out.println(`DEPRECATION WARNING: Cancelling a job with savepoint is deprecated. Use "stop" instead.`)
		if o.WithSavepoint != "" {
			out.println("Cancelling job %s with %s savepoint to %s.", o.JobID, format, o.WithSavepoint)
		} else {
			out.println("Cancelling job %s with %s savepoint to default savepoint directory.", o.JobID, format)
		}
		trigger, err := s.client.TriggerSavepoint(s.ctx, o.JobID, s.savepointDir(o.WithSavepoint), format, true)
		var loc string
		if err == nil {
			loc, err = s.client.WaitSavepoint(s.ctx, o.JobID, trigger)
		}
		if err != nil {
			return s.explain(err, fmt.Sprintf("Could not cancel job %s", o.JobID))
		}
		out.println("Cancelled job %s. Savepoint stored in %s.", o.JobID, loc)
		out.result(map[string]string{"jobId": o.JobID, "savepointPath": loc, "status": "CANCELED"})
		return nil
	}
	out.println("Cancelling job %s.", o.JobID)
	if err := s.client.Cancel(s.ctx, o.JobID); err != nil {
		return s.explain(err, fmt.Sprintf("Could not cancel job %s", o.JobID))
	}
	// Flink returns once cancellation has begun; gflink waits until the
	// job is CANCELED, so that a script's next command sees it ended.
	state := waitTerminal(f, s, o.JobID)
	out.println("Cancelled job %s.", o.JobID)
	out.result(map[string]string{"jobId": o.JobID, "status": state})
	return nil
}

// waitTerminal polls a job's status until it has ended (or the process
// serving it is gone, when the registry has its final state).
func waitTerminal(f *Factory, s *session, jobID string) string {
	delay := 5 * time.Millisecond
	for {
		st, err := s.client.JobStatus(s.ctx, jobID)
		if err == nil && (st == "CANCELED" || st == "FINISHED" || st == "FAILED") {
			return st
		}
		var ue *rest.UnreachableError
		if errors.As(err, &ue) {
			// A gflink job's process leaves once its job has ended: its
			// entry has the final state. An endpoint named with -m that
			// went away after accepting the cancel has nothing more to
			// tell; polling it until the timeout would only stall.
			if e, gerr := jobregistry.NewRegistry(jobregistry.Home(f.Getenv)).Get(jobID); gerr == nil && e.Terminal() {
				return e.State
			}
			if s.entry == nil {
				return "CANCELLING"
			}
		}
		if err != nil && !errors.As(err, &ue) || s.ctx.Err() != nil {
			return "CANCELLING"
		}
		t := time.NewTimer(delay)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return "CANCELLING"
		case <-t.C:
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}
