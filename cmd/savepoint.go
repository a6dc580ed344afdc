package cmd

import (
	"fmt"
	"strings"

	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/spf13/cobra"
)

// SavepointOptions are the options of `gflink savepoint`.
type SavepointOptions struct {
	clientOptions
	JobID    string
	Target   string
	Dispose  string
	Type     string
	Detached bool
	Extra    bool // more positional arguments than needed
}

func newSavepointCmd(f *Factory, g *globalOptions, runF func(*SavepointOptions) error) *cobra.Command {
	o := &SavepointOptions{clientOptions: clientOptions{Global: g}}
	c := &cobra.Command{
		Use:  "savepoint",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case c.Flags().Changed("dispose"):
				// Disposing takes no job id: arguments are ignored.
				if o.Dispose == "" {
					return usageErrorf("Missing argument for option: d")
				}
			case len(args) == 0:
				return usageErrorf("Missing JobID. Specify a Job ID to trigger a savepoint.")
			default:
				o.JobID = args[0]
				if len(args) > 1 {
					o.Target = args[1]
				}
				o.Extra = len(args) > 2
			}
			if runF != nil {
				return runF(o)
			}
			return runSavepoint(f, o)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&o.Dispose, "dispose", "d", "", "Path of savepoint to dispose.")
	fl.BoolVar(&o.Detached, "detached", false, "Triggering savepoint in detached mode, client and JM are decoupled, return the savepoint trigger id as the unique identification of the detached savepoint.")
	fl.StringP("jarfile", "j", "", "Flink program JAR file (accepted for compatibility; gflink needs none).")
	fl.SetAnnotation("jarfile", "argname", []string{"jarfile"})
	fl.StringVar(&o.Type, "type", "", "Describes the binary format in which a savepoint should be taken. Supported options: [canonical - a common format for all state backends, allow for changing state backends, native = a specific format for the chosen state backend, might be faster to take and restore from.")
	addTimeoutFlag(c, &o.clientOptions)
	return c
}

// formatType parses -type (case-insensitive), with Flink's message.
func formatType(s string) (string, error) {
	switch strings.ToUpper(s) {
	case "":
		return string(savepoint.FormatCanonical), nil
	case string(savepoint.FormatCanonical), string(savepoint.FormatNative):
		return strings.ToUpper(s), nil
	}
	return "", fmt.Errorf("Could not parse value for enum class org.apache.flink.core.execution.SavepointFormatType. Expected one of: [[CANONICAL, NATIVE]] (-type %s)", s)
}

// runSavepoint triggers a savepoint, or disposes of one with -dispose.
func runSavepoint(f *Factory, o *SavepointOptions) error {
	if o.Dispose != "" {
		return runDispose(f, o)
	}
	out, err := jobOutput(f, o.Global, &o.JobID)
	if err != nil {
		return err
	}
	format, err := formatType(o.Type)
	if err != nil {
		return err
	}
	if o.Extra {
		out.println("Provided more arguments than required. Ignoring not needed arguments.")
	}
	s, err := connect(f, &o.clientOptions, o.JobID)
	if err != nil {
		return err
	}
	defer s.cancel()
	if o.Detached {
		out.println("Triggering savepoint in detached mode for job %s.", o.JobID)
	} else {
		out.println("Triggering savepoint for job %s.", o.JobID)
		out.println("Waiting for response...")
	}
	trigger, err := s.client.TriggerSavepoint(s.ctx, o.JobID, s.savepointDir(o.Target), format, false)
	return s.awaitSavepoint(out, o.JobID, o.Detached, trigger, err, savepointMessages{
		failed:            fmt.Sprintf("Failed to trigger a savepoint for the job %s", o.JobID),
		detachedFailed:    fmt.Sprintf("Triggering a detached savepoint for the job %s failed", o.JobID),
		detachedTriggered: "Successfully trigger manual savepoint",
		resumeHint:        true,
	})
}

// savepointMessages are Flink's lines for one savepoint verb (savepoint or
// stop), which differ in wording only.
type savepointMessages struct {
	failed, detachedFailed, detachedTriggered string
	resumeHint                                bool
}

// awaitSavepoint finishes a triggered savepoint or stop-with-savepoint:
// detached, it reports the trigger id; otherwise it waits for the path.
func (s *session) awaitSavepoint(out output, jobID string, detached bool, trigger string, err error, m savepointMessages) error {
	if err != nil {
		if detached {
			return s.explain(err, m.detachedFailed)
		}
		return s.explain(err, m.failed)
	}
	if detached {
		out.println("%s, triggerId: %s", m.detachedTriggered, trigger)
		out.result(map[string]string{"jobId": jobID, "triggerId": trigger})
		return nil
	}
	loc, err := s.client.WaitSavepoint(s.ctx, jobID, trigger)
	if err != nil {
		return s.explain(err, m.failed)
	}
	out.println("Savepoint completed. Path: %s", loc)
	if m.resumeHint {
		out.println("You can resume your program from this savepoint with the run command.")
	}
	out.result(map[string]string{"jobId": jobID, "savepointPath": loc})
	return nil
}

// runDispose deletes a savepoint: through the REST endpoint with -m, else
// directly (gflink needs no cluster for that). A checkpoint of a job that
// is still running is refused: the job may need it to recover.
func runDispose(f *Factory, o *SavepointOptions) error {
	out, err := newOutput(f, o.Global)
	if err != nil {
		return err
	}
	path := absPath(o.Dispose)
	out.println("Disposing savepoint '%s'.", o.Dispose)
	out.println("Waiting for response...")
	fail := func(err error) error {
		return fmt.Errorf("Failed to dispose the savepoint '%s': %w", o.Dispose, err)
	}
	if o.Global.JobManager != "" {
		s, err := connect(f, &o.clientOptions, "")
		if err != nil {
			return err
		}
		defer s.cancel()
		trigger, err := s.client.Dispose(s.ctx, path)
		if err == nil {
			err = s.client.WaitDisposal(s.ctx, trigger)
		}
		if err != nil {
			return s.explain(err, fmt.Sprintf("Failed to dispose the savepoint '%s'", o.Dispose))
		}
	} else {
		reg := jobregistry.NewRegistry(jobregistry.Home(f.Getenv))
		err := restore.Dispose(f.FS, path, func(md *savepoint.Metadata) error {
			if md.Kind != savepoint.KindCheckpoint {
				return nil
			}
			if e, err := reg.Get(md.JobID); err == nil && !e.Terminal() {
				return fmt.Errorf("checkpoint %d belongs to job %s, which is still running and may need it to recover", md.CheckpointID, md.JobID)
			}
			return nil
		})
		if err != nil {
			return fail(err)
		}
	}
	out.println("Savepoint '%s' disposed.", o.Dispose)
	out.result(map[string]any{"savepointPath": savepointURI(path), "disposed": true})
	return nil
}

func savepointURI(p string) string {
	if lp, err := savepoint.LocalPath(p); err == nil {
		return savepoint.URI(lp)
	}
	return p
}
