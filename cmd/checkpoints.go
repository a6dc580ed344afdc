package cmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gflink/gflink/engine/cluster"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/rest"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"
)

// CheckpointsOptions are the options of `gflink checkpoints`.
type CheckpointsOptions struct {
	clientOptions
	Target string // a job id or a directory
	Latest bool
}

func newCheckpointsCmd(f *Factory, g *globalOptions, runF func(*CheckpointsOptions) error) *cobra.Command {
	o := &CheckpointsOptions{clientOptions: clientOptions{Global: g}}
	c := &cobra.Command{
		Use: "checkpoints",
		Long: "Lists the retained checkpoints and savepoints of a job: over its REST endpoint while it runs, from disk " +
			"when it has ended or its process was killed (the checkpoint directory it registered; else execution.checkpointing.dir/<jobId>), or found under a directory — a " +
			"job's checkpoint directory, a checkpoint base directory, or a savepoint directory. Marks which ones the " +
			"running job owns (and may delete) and which it must not touch.",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("Specify one job id or directory: gflink checkpoints <jobId | directory> [--latest].")
			}
			o.Target = args[0]
			if runF != nil {
				return runF(o)
			}
			return runCheckpoints(f, o)
		},
	}
	c.Flags().BoolVar(&o.Latest, "latest", false, "Print only the path of the newest complete checkpoint or savepoint, for scripts: gflink run -s \"$(gflink checkpoints --latest <jobId | dir>)\" ...")
	addTimeoutFlag(c, &o.clientOptions)
	return c
}

// snapshotRow is restore.Snapshot with the field names of
// `checkpoints -o json`, which scripts read. Rows are converted, not
// copied field by field, so that a field added to Snapshot cannot reach
// the JSON without a name chosen here.
type snapshotRow struct {
	ID        int64            `json:"id"`
	Kind      string           `json:"kind"`   // checkpoint | savepoint
	Type      string           `json:"type"`   // full | incremental | changelog
	Format    savepoint.Format `json:"format"` // NATIVE | CANONICAL
	Completed int64            `json:"completed"`
	Size      int64            `json:"size"`
	// Added is what the snapshot wrote itself (Flink's checkpointed_size).
	Added    int64  `json:"checkpointedSize"`
	Path     string `json:"path"`
	JobID    string `json:"jobId,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Restored bool   `json:"restored,omitempty"`
	// Changelog: the materializations a changelog checkpoint refers to
	// and the log since them.
	Changelog *savepoint.ChangelogSummary `json:"changelog,omitempty"`
}

func runCheckpoints(f *Factory, o *CheckpointsOptions) error {
	out, err := newOutput(f, o.Global)
	if err != nil {
		return err
	}
	log := newLogger(f.IO.ErrOut, logLevel(f))
	var rows []restore.Snapshot
	var notes []string
	if jobIDPattern.MatchString(o.Target) && !isDir(o.Target) {
		id := strings.ToLower(o.Target)
		rows, notes, err = jobSnapshots(f, o, id)
	} else {
		dir, perr := savepoint.LocalPath(o.Target)
		if perr != nil {
			return perr
		}
		rows, notes, err = restore.FindSnapshots(f.FS, dir)
		markRunningJobsCheckpoints(f, rows)
	}
	if err != nil {
		return err
	}
	for _, n := range notes {
		log.Warn(n)
	}
	restore.SortSnapshots(rows)
	if o.Latest {
		if len(rows) == 0 {
			return fmt.Errorf("No complete checkpoint or savepoint found for %s.", o.Target)
		}
		last := rows[len(rows)-1]
		p, _ := savepoint.LocalPath(last.Path)
		if p == "" {
			return fmt.Errorf("The newest checkpoint of %s (%d) is kept in memory only: it has no path. Configure execution.checkpointing.dir to keep checkpoints on disk.", o.Target, last.ID)
		}
		out.println("%s", p)
		out.result(map[string]any{"path": p, "id": last.ID, "kind": last.Kind})
		return nil
	}
	if out.json {
		js := []snapshotRow{}
		for _, r := range rows {
			js = append(js, snapshotRow(r))
		}
		out.result(js)
		return nil
	}
	if len(rows) == 0 {
		fmt.Fprintf(f.IO.Out, "No complete checkpoint or savepoint found for %s.\n", o.Target)
		return nil
	}
	printSnapshots(f, rows)
	return nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// jobSnapshots lists a job's snapshots: over REST while it runs, else from
// its registered checkpoint directory.
func jobSnapshots(f *Factory, o *CheckpointsOptions, id string) ([]restore.Snapshot, []string, error) {
	reg := jobregistry.NewRegistry(jobregistry.Home(f.Getenv))
	e, err := reg.Get(id)
	if o.Global.JobManager != "" || err == nil && !e.Terminal() {
		s, err := connect(f, &o.clientOptions, id)
		if err != nil {
			return nil, nil, err
		}
		defer s.cancel()
		retained, gflink, err := s.client.Retained(s.ctx, id)
		var ue *rest.UnreachableError
		if errors.As(err, &ue) && e != nil && e.CheckpointDir != "" && isDir(e.CheckpointDir) {
			// The process died a moment ago and is not yet reaped: the
			// disk still has the answer.
			return restore.FindSnapshots(f.FS, e.CheckpointDir)
		}
		if err != nil {
			return nil, nil, s.explain(err, fmt.Sprintf("Failed to list the checkpoints of job %s", id))
		}
		var rows []restore.Snapshot
		for _, r := range retained {
			typ := "full"
			switch {
			case r.Changelog != nil:
				typ = "changelog"
			case r.Incremental:
				typ = "incremental"
			}
			row := restore.Snapshot{ID: r.ID, Kind: restore.KindOf(savepoint.Kind(r.Type)), Type: typ, Format: savepoint.Format(r.Format), Completed: r.Completed,
				Size: r.Size, Added: r.Added, Path: r.Path, JobID: id, Restored: r.Restored, Owner: restore.OwnerUser, Changelog: r.Changelog}
			if r.Owned {
				row.Owner = restore.OwnerJob
			}
			if !gflink && r.Type == string(savepoint.KindCheckpoint) {
				row.Format = savepoint.FormatNative
			}
			rows = append(rows, row)
		}
		return rows, nil, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Its process was killed: the retired entry knows where its
		// checkpoints are. Otherwise (it ran with another GFLINK_HOME) look
		// where the configuration puts them.
		if lost, err := reg.Lost(id); err == nil && lost.CheckpointDir != "" && isDir(lost.CheckpointDir) {
			return restore.FindSnapshots(f.FS, lost.CheckpointDir)
		}
		if dir := configuredJobCheckpointDir(f, o, id); dir != "" && isDir(dir) {
			return restore.FindSnapshots(f.FS, dir)
		}
		return nil, nil, fmt.Errorf("Job %s is not registered in %s, and the configured execution.checkpointing.dir holds no checkpoints of it: pass the directory holding them instead (gflink checkpoints <dir>/%s), or -D execution.checkpointing.dir=<dir>.", id, reg.Dir, id)
	}
	if err != nil {
		return nil, nil, err
	}
	var rows []restore.Snapshot
	var notes []string
	if e.CheckpointDir != "" && isDir(e.CheckpointDir) {
		if rows, notes, err = restore.FindSnapshots(f.FS, e.CheckpointDir); err != nil {
			return nil, nil, err
		}
	}
	// The savepoints it took (a stop's among them) lie wherever the user
	// put them; the registry remembers where.
	for _, uri := range e.Savepoints {
		p, err := savepoint.LocalPath(uri)
		if err != nil {
			continue
		}
		if !isDir(p) {
			notes = append(notes, fmt.Sprintf("Savepoint %s, taken by job %s, is gone (disposed or moved).", uri, id))
			continue
		}
		sp, spNotes, err := restore.FindSnapshots(f.FS, p)
		if err != nil {
			notes = append(notes, err.Error())
			continue
		}
		rows, notes = append(rows, sp...), append(notes, spNotes...)
	}
	return rows, notes, nil
}

// markRunningJobsCheckpoints marks the checkpoints found in the checkpoint
// directory of a registered running job as that job's: it may delete them.
// (A snapshot another running job claimed shows as the job's only when
// listed by that job's id.)
func markRunningJobsCheckpoints(f *Factory, rows []restore.Snapshot) {
	entries, _ := jobregistry.NewRegistry(jobregistry.Home(f.Getenv)).List()
	for i := range rows {
		p, err := savepoint.LocalPath(rows[i].Path)
		if err != nil || rows[i].Kind != restore.KindCheckpoint {
			continue
		}
		for _, e := range entries {
			if !e.Terminal() && e.CheckpointDir != "" && strings.HasPrefix(p, e.CheckpointDir+string(filepath.Separator)) {
				rows[i].Owner = restore.OwnerJob
			}
		}
	}
}

// configuredJobCheckpointDir is <execution.checkpointing.dir>/<jobId> from
// the client's configuration (file and -D), or "".
func configuredJobCheckpointDir(f *Factory, o *CheckpointsOptions, id string) string {
	conf, err := loadConfig(f, o.Global, newLogger(io.Discard, slog.LevelError))
	if err != nil {
		return ""
	}
	return cluster.JobCheckpointDir(conf, id)
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func ownerText(r restore.Snapshot) string {
	switch r.Owner {
	case restore.OwnerJob:
		if r.Restored {
			return "job (claimed; may delete)"
		}
		return "job (may delete)"
	case restore.OwnerUser:
		if r.Restored {
			return "user (restored from; never deleted)"
		}
		return "user (never deleted)"
	}
	return "-"
}

func printSnapshots(f *Factory, rows []restore.Snapshot) {
	header := []string{"ID", "KIND", "FORMAT", "COMPLETED", "SIZE", "ADDED", "OWNER", "PATH"}
	cells := func(r restore.Snapshot) []string {
		completed := "-"
		if r.Completed > 0 {
			completed = time.UnixMilli(r.Completed).Format("2006-01-02 15:04:05")
		}
		path := r.Path
		if path == "" {
			path = "(in memory)"
		}
		kind := r.Kind + " (" + r.Type + ")"
		if c := r.Changelog; c != nil {
			kind = r.Kind + " (changelog: " + materializations(c) + ", log " + humanSize(c.LogBytes) + ")"
		}
		return []string{fmt.Sprint(r.ID), kind, string(r.Format), completed, humanSize(r.Size), humanSize(r.Added), ownerText(r), path}
	}
	if f.IO.OutTTY && !f.IO.NoColor {
		tw := tablewriter.NewWriter(f.IO.Out)
		tw.Header(toAny(header)...)
		for _, r := range rows {
			tw.Append(toAny(cells(r))...)
		}
		tw.Render()
		return
	}
	w := tabwriter.NewWriter(f.IO.Out, 0, 0, 2, ' ', 0)
	writeRow(w, header)
	for _, r := range rows {
		writeRow(w, cells(r))
	}
	w.Flush()
}

// materializations names the materializations a changelog checkpoint's
// subtasks refer to.
func materializations(c *savepoint.ChangelogSummary) string {
	switch {
	case c.MaxMaterialization == 0:
		return "not materialized yet"
	case c.MinMaterialization == c.MaxMaterialization:
		return fmt.Sprintf("materialization %d", c.MaxMaterialization)
	}
	return fmt.Sprintf("materializations %d-%d", c.MinMaterialization, c.MaxMaterialization)
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func writeRow(w io.Writer, cells []string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}
