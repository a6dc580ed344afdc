package cmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"
)

// InspectOptions are the options of `gflink inspect`.
type InspectOptions struct {
	Global *globalOptions
	Path   string
}

func newInspectCmd(f *Factory, g *globalOptions, runF func(*InspectOptions) error) *cobra.Command {
	o := &InspectOptions{Global: g}
	return &cobra.Command{
		Use:  "inspect",
		Long: "Shows what a snapshot holds: its job, checkpoint id, kind, format and state backend, and per operator uid its parallelism, max parallelism, state names, entries and size. The path may be a chk-N or savepoint directory, its _metadata file, or a job's checkpoint directory (its newest complete checkpoint).",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("Specify the snapshot to inspect: gflink inspect <path>.")
			}
			o.Path = args[0]
			if runF != nil {
				return runF(o)
			}
			return runInspect(f, o)
		},
	}
}

type inspectedState struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Type    string `json:"type,omitempty"`
	Entries int64  `json:"entries"`
}

type inspectedOperator struct {
	UID            string           `json:"uid"`
	OperatorID     string           `json:"operatorId"`
	Name           string           `json:"name,omitempty"`
	Parallelism    int              `json:"parallelism"`
	MaxParallelism int              `json:"maxParallelism"`
	Finished       bool             `json:"finished,omitempty"`
	Size           int64            `json:"size"`
	States         []inspectedState `json:"states"`
	// Changelog: per subtask, the materialization and the log since it
	// (checkpoints of the changelog state backend).
	Changelog []inspectedChangelog `json:"changelog,omitempty"`
	// InFlight: per subtask and channel, the records in flight an
	// unaligned checkpoint stored (channel state).
	InFlight []inspectedChannel `json:"channelState,omitempty"`
}

type inspectedChannel struct {
	Subtask int `json:"subtask"`
	// Direction is "input" (received, not processed) or "output" (not
	// sent); Peer and Channel are the other end's operator uid and subtask
	// (-1: records restored earlier and not yet processed).
	Direction string `json:"direction"`
	Peer      string `json:"peer"`
	Channel   int    `json:"channel"`
	Records   int64  `json:"records"`
	Bytes     int64  `json:"bytes"`
}

type inspectedChangelog struct {
	Subtask           int   `json:"subtask"`
	MaterializationID int64 `json:"materializationId"`
	MaterializedBytes int64 `json:"materializedBytes"`
	LogFiles          int   `json:"logFiles"`
	LogBytes          int64 `json:"logBytes"`
}

func runInspect(f *Factory, o *InspectOptions) error {
	out, err := newOutput(f, o.Global)
	if err != nil {
		return err
	}
	r, err := restore.Resolve(f.FS, o.Path)
	if err != nil {
		return err
	}
	m := r.Metadata
	verr := restore.VerifyStateFiles(f.FS, r.Dir, m)
	var ops []inspectedOperator
	maxPar := 0
	for _, op := range m.Operators {
		io := inspectedOperator{UID: op.UID, OperatorID: op.OperatorID, Name: op.Name, Parallelism: op.Parallelism,
			MaxParallelism: op.MaxParallelism, Finished: op.Finished, States: []inspectedState{}}
		for _, st := range op.Subtasks {
			io.Size += st.Bytes
			if st.Keyed != nil && st.Keyed.Changelog != nil {
				c := st.Keyed.Changelog
				ic := inspectedChangelog{Subtask: st.Index, MaterializationID: c.MaterializationID, MaterializedBytes: c.MaterializedSize, LogFiles: len(c.Log)}
				for _, f := range c.Log {
					ic.LogBytes += f.Size
				}
				io.Changelog = append(io.Changelog, ic)
			}
			for _, d := range []struct {
				dir string
				hs  []savepoint.ChannelStateHandle
			}{{"input", st.InputChannels}, {"output", st.OutputChannels}} {
				for _, h := range d.hs {
					io.InFlight = append(io.InFlight, inspectedChannel{Subtask: st.Index, Direction: d.dir, Peer: h.Peer,
						Channel: h.Channel, Records: h.Records, Bytes: h.Stream.Length})
				}
			}
		}
		for _, s := range op.States {
			io.States = append(io.States, inspectedState{Name: s.Name, Kind: s.Kind, Type: s.Type, Entries: s.Entries})
		}
		maxPar = max(maxPar, op.MaxParallelism)
		ops = append(ops, io)
	}
	res := map[string]any{"path": savepoint.URI(r.Dir), "jobId": m.JobID, "jobName": m.JobName,
		"checkpointId": m.CheckpointID, "kind": m.Kind, "format": m.Format, "stateBackend": m.Backend,
		"maxParallelism": maxPar, "formatVersion": m.Version, "triggerTimestamp": m.TriggerTimestamp,
		"completionTimestamp": m.CompletionTimestamp, "stateSize": m.StateSize(), "channelStateSize": m.ChannelStateSize(), "checkpointedSize": m.CheckpointedSize(), "sharedFiles": sharedOrEmpty(m.SharedFiles()), "operators": ops, "intact": verr == nil}
	if c := m.Changelog(); c != nil {
		res["changelog"] = c
	}
	if verr != nil {
		res["damage"] = verr.Error()
	}
	if out.json {
		out.result(res)
	} else {
		w := f.IO.Out
		fmt.Fprintf(w, "Snapshot:         %s\n", savepoint.URI(r.Dir))
		fmt.Fprintf(w, "Job:              %s (%s)\n", m.JobID, m.JobName)
		fmt.Fprintf(w, "Checkpoint id:    %d\n", m.CheckpointID)
		fmt.Fprintf(w, "Kind:             %s, %s format, %s state backend (format version %d)\n", m.Kind, m.Format, m.Backend, m.Version)
		fmt.Fprintf(w, "Completed:        %s\n", time.UnixMilli(m.CompletionTimestamp).Format("2006-01-02 15:04:05.000"))
		fmt.Fprintf(w, "Max parallelism:  %d\n", maxPar)
		fmt.Fprintf(w, "State size:       %s\n", humanSize(m.StateSize()))
		if m.HasChannelState() {
			fmt.Fprintf(w, "In flight:        %s (unaligned checkpoint: records in flight, replayed on restore)\n", humanSize(m.ChannelStateSize()))
		}
		if c := m.Changelog(); c != nil {
			fmt.Fprintf(w, "Changelog:        %s (%s), then a log of %s in %d files; added %s\n",
				materializations(c), humanSize(c.MaterializedBytes), humanSize(c.LogBytes), c.LogFiles, humanSize(m.CheckpointedSize()))
		} else if n := len(m.SharedFiles()); n > 0 && m.Full {
			fmt.Fprintf(w, "Added:            %s (full: all of it; its %d SST files are in the job's shared/ directory, for the checkpoints after it)\n", humanSize(m.CheckpointedSize()), n)
		} else if n > 0 {
			fmt.Fprintf(w, "Added:            %s (incremental: refers to %d files in the job's shared/ directory)\n", humanSize(m.CheckpointedSize()), n)
		}
		if verr != nil {
			fmt.Fprintf(w, "DAMAGED:          %v\n", verr)
		}
		fmt.Fprintln(w)
		header := []string{"UID", "OPERATOR ID", "PARALLELISM", "MAX PARALLELISM", "STATE", "KIND", "ENTRIES", "SIZE"}
		var rows [][]string
		for _, op := range ops {
			size := humanSize(op.Size)
			if len(op.States) == 0 {
				rows = append(rows, []string{op.UID, op.OperatorID, fmt.Sprint(op.Parallelism), fmt.Sprint(op.MaxParallelism), "-", "-", "-", size})
			}
			for i, s := range op.States {
				uid, id, p, mp := op.UID, op.OperatorID, fmt.Sprint(op.Parallelism), fmt.Sprint(op.MaxParallelism)
				if i > 0 {
					uid, id, p, mp, size = "", "", "", "", ""
				}
				rows = append(rows, []string{uid, id, p, mp, s.Name, s.Kind, fmt.Sprint(s.Entries), size})
			}
		}
		if f.IO.OutTTY && !f.IO.NoColor {
			tw := tablewriter.NewWriter(w)
			tw.Header(toAny(header)...)
			for _, row := range rows {
				tw.Append(toAny(row)...)
			}
			tw.Render()
		} else {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			writeRow(tw, header)
			for _, row := range rows {
				writeRow(tw, row)
			}
			tw.Flush()
		}
		if m.Changelog() != nil {
			fmt.Fprintf(w, "\nChangelog by subtask (materialization, then the log replayed on it):\n")
			for _, op := range ops {
				for _, c := range op.Changelog {
					mat := "not materialized yet"
					if c.MaterializationID > 0 {
						mat = fmt.Sprintf("materialization %d (%s)", c.MaterializationID, humanSize(c.MaterializedBytes))
					}
					fmt.Fprintf(w, "  %s subtask %d: %s, log %s in %d files\n", op.UID, c.Subtask, mat, humanSize(c.LogBytes), c.LogFiles)
				}
			}
		}
		if m.HasChannelState() {
			fmt.Fprintf(w, "\nRecords in flight by subtask (input: received, not processed; output: not sent):\n")
			for _, op := range ops {
				for _, c := range op.InFlight {
					peer := fmt.Sprintf("%s subtask %d", c.Peer, c.Channel)
					if c.Channel < 0 {
						peer = c.Peer + " (restored earlier)"
					}
					arrow := "from"
					if c.Direction == "output" {
						arrow = "to"
					}
					fmt.Fprintf(w, "  %s subtask %d, %s %s %s: %d records, %s\n", op.UID, c.Subtask, c.Direction, arrow, peer, c.Records, humanSize(c.Bytes))
				}
			}
		}
		if shared := m.SharedFiles(); len(shared) > 0 {
			// Which files of the job's shared/ directory (and, with the
			// changelog, of its base path) this checkpoint needs:
			// deleting one breaks it.
			where := "relative to its directory"
			if len(m.ChangelogFiles()) > 0 {
				where += "; changelog files by absolute path"
			}
			fmt.Fprintf(w, "\nShared files it refers to (%s):\n", where)
			for _, f := range shared {
				fmt.Fprintf(w, "  %s\n", f)
			}
		}
	}
	if verr != nil {
		return &SilentError{Code: ExitFailure}
	}
	return nil
}

func sharedOrEmpty(files []string) []string {
	if files == nil {
		return []string{}
	}
	return files
}
