package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
)

// StopOptions are the options of `gflink stop`.
type StopOptions struct {
	clientOptions
	JobID         string
	SavepointPath string
	Drain         bool
	Type          string
	Detached      bool
}

func newStopCmd(f *Factory, g *globalOptions, runF func(*StopOptions) error) *cobra.Command {
	o := &StopOptions{clientOptions: clientOptions{Global: g}}
	c := &cobra.Command{
		Use:  "stop",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if !jobIDArg(args, c.Flags().Changed("savepointPath"), &o.SavepointPath, &o.JobID) {
				return usageErrorf("Missing JobId")
			}
			if runF != nil {
				return runF(o)
			}
			return runStop(f, o)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&o.SavepointPath, "savepointPath", "p", "", `Path to the savepoint (for example hdfs:///flink/savepoint-1537). If no directory is specified, the configured default will be used ("execution.checkpointing.savepoint-dir").`)
	fl.SetAnnotation("savepointPath", "argname", []string{"savepointPath"})
	fl.BoolVarP(&o.Drain, "drain", "d", false, "Send MAX_WATERMARK before taking the savepoint and stopping the pipeline.")
	fl.BoolVar(&o.Detached, "detached", false, "Triggering savepoint in detached mode, client and JM are decoupled, return the savepoint trigger id as the unique identification of the detached savepoint.")
	fl.StringVar(&o.Type, "type", "", "Describes the binary format in which a savepoint should be taken. Supported options: [canonical - a common format for all state backends, allow for changing state backends, native = a specific format for the chosen state backend, might be faster to take and restore from.")
	addTimeoutFlag(c, &o.clientOptions)
	return c
}

func runStop(f *Factory, o *StopOptions) error {
	out, err := jobOutput(f, o.Global, &o.JobID)
	if err != nil {
		return err
	}
	format, err := formatType(o.Type)
	if err != nil {
		return err
	}
	s, err := connect(f, &o.clientOptions, o.JobID)
	if err != nil {
		return err
	}
	defer s.cancel()
	verb := "Suspending"
	if o.Drain {
		verb = "Draining"
	}
	out.println("%s job \"%s\" with a %s savepoint.", verb, o.JobID, format)
	if o.Detached {
		out.println("Triggering stop-with-savepoint in detached mode for job %s.", o.JobID)
	} else {
		out.println("Triggering stop-with-savepoint for job %s.", o.JobID)
		out.println("Waiting for response...")
	}
	trigger, err := s.client.Stop(s.ctx, o.JobID, s.savepointDir(o.SavepointPath), format, o.Drain)
	return s.awaitSavepoint(out, o.JobID, o.Detached, trigger, err, savepointMessages{
		failed:            fmt.Sprintf("Could not stop with a savepoint job \"%s\"", o.JobID),
		detachedFailed:    fmt.Sprintf("Could not stop with a detached savepoint job \"%s\"", o.JobID),
		detachedTriggered: "Successfully trigger stop-with-savepoint in detached mode",
	})
}
