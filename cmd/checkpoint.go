package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
)

// CheckpointOptions are the options of `gflink checkpoint`.
type CheckpointOptions struct {
	clientOptions
	JobID string
	Full  bool
}

func newCheckpointCmd(f *Factory, g *globalOptions, runF func(*CheckpointOptions) error) *cobra.Command {
	o := &CheckpointOptions{clientOptions: clientOptions{Global: g}}
	c := &cobra.Command{
		Use:  "checkpoint",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("Missing JobID. Specify a Job ID to manipulate a checkpoint.")
			}
			o.JobID = args[0]
			if runF != nil {
				return runF(o)
			}
			return runCheckpoint(f, o)
		},
	}
	c.Flags().BoolVar(&o.Full, "full", false, "Defines whether to trigger this checkpoint as a full one.")
	addTimeoutFlag(c, &o.clientOptions)
	return c
}

func runCheckpoint(f *Factory, o *CheckpointOptions) error {
	out, err := jobOutput(f, o.Global, &o.JobID)
	if err != nil {
		return err
	}
	s, err := connect(f, &o.clientOptions, o.JobID)
	if err != nil {
		return err
	}
	defer s.cancel()
	out.println("Triggering checkpoint for job %s.", o.JobID)
	out.println("Waiting for response...")
	trigger, err := s.client.TriggerCheckpoint(s.ctx, o.JobID, o.Full)
	var id int64
	if err == nil {
		id, err = s.client.WaitCheckpoint(s.ctx, o.JobID, trigger)
	}
	if err != nil {
		return s.explain(err, fmt.Sprintf("Failed to trigger a checkpoint for the job %s", o.JobID))
	}
	if o.Full {
		out.println("Checkpoint(FULL) %d for job %s completed.", id, o.JobID)
	} else {
		out.println("Checkpoint %d for job %s completed.", id, o.JobID)
	}
	res := map[string]any{"jobId": o.JobID, "checkpointId": id}
	path, err := s.client.CheckpointPath(s.ctx, o.JobID, id)
	switch {
	case err == nil && path == "":
		// Flink prints the resume hint regardless; here it would be false.
		out.println("The checkpoint is kept in memory only (execution.checkpointing.storage: jobmanager, no execution.checkpointing.dir): nothing can be resumed from it once the job ends.")
	default:
		// A Flink cluster (-m) may not say where; it says the same line.
		out.println("You can resume your program from this checkpoint with the run command.")
		if path != "" {
			res["path"] = path
		}
	}
	out.result(res)
	return nil
}
