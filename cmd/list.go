package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/rest"
	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"
)

// ListOptions are the options of `gflink list`.
type ListOptions struct {
	clientOptions
	Running, Scheduled, All bool
	// Clear removes the registry entries of jobs that are not running.
	Clear bool
}

func newListCmd(f *Factory, g *globalOptions, runF func(*ListOptions) error) *cobra.Command {
	o := &ListOptions{clientOptions: clientOptions{Global: g}}
	c := &cobra.Command{
		Use: "list",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("Unexpected argument for list: %s. The list action takes only options (-r, -s, -a).", strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return runList(f, o)
		},
	}
	c.Flags().BoolVarP(&o.All, "all", "a", false, "Show all programs and their JobIDs")
	c.Flags().BoolVarP(&o.Running, "running", "r", false, "Show only running programs and their JobIDs")
	c.Flags().BoolVarP(&o.Scheduled, "scheduled", "s", false, "Show only scheduled programs and their JobIDs")
	c.Flags().BoolVar(&o.Clear, "clear", false, "Remove the entries of ended jobs (and of jobs whose process died) from $GFLINK_HOME/jobs, then list")
	addTimeoutFlag(c, &o.clientOptions)
	return c
}

// listedJob is one job in list's output and JSON.
type listedJob struct {
	JobID     string `json:"jid"`
	Name      string `json:"name"`
	State     string `json:"state"`
	StartTime int64  `json:"start-time"`
	EndTime   int64  `json:"end-time"`
	Endpoint  string `json:"endpoint,omitempty"`
	// Under high availability: the leading process (pid@host) and how
	// many stand by.
	Leader   string `json:"leader,omitempty"`
	Standbys *int   `json:"standbys,omitempty"`
	// A running job's throughput — records/s its sources send on and
	// its last vertices take in — and its last completed checkpoint, from
	// its metrics (with -o wide and -o json; absent when not known).
	RecordsInPerSecond     *float64 `json:"records-in-per-second,omitempty"`
	RecordsOutPerSecond    *float64 `json:"records-out-per-second,omitempty"`
	LastCheckpointID       *int64   `json:"last-checkpoint-id,omitempty"`
	LastCheckpointDuration *int64   `json:"last-checkpoint-duration,omitempty"`
	LastCheckpointSize     *int64   `json:"last-checkpoint-size,omitempty"`
}

// statsTimeout bounds how long list asks one job for its figures.
const statsTimeout = 2 * time.Second

// addStats asks a running job's endpoint for its throughput and last
// checkpoint. A job that cannot be asked (it just ended) keeps none.
func addStats(ctx context.Context, c *rest.Client, j *listedJob) {
	if category(j.State) != "running" {
		return
	}
	// A job that does not answer at once (ending, stuck) is listed
	// without them rather than holding the list up.
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	plan, err := c.JobPlan(ctx, j.JobID)
	if err != nil {
		return
	}
	feeds := map[string]bool{}
	for _, n := range plan {
		for _, in := range n.Inputs {
			feeds[in.ID] = true
		}
	}
	// As the status line counts: in, what the sources read (their first
	// operator's numRecordsIn); out, what the last vertices take in — a
	// lone vertex's, what it reads.
	var in, out float64
	for _, n := range plan {
		source, sink := len(n.Inputs) == 0, !feeds[n.ID]
		if source {
			read, err := c.SourceReadRate(ctx, j.JobID, n.ID)
			if err != nil {
				return
			}
			in += read
			if sink {
				out += read
			}
		} else if sink {
			sums, err := c.SubtaskSums(ctx, j.JobID, n.ID, "numRecordsInPerSecond")
			if err != nil {
				return
			}
			out += sums["numRecordsInPerSecond"]
		}
	}
	j.RecordsInPerSecond, j.RecordsOutPerSecond = &in, &out
	m, err := c.JobMetrics(ctx, j.JobID, "lastCompletedCheckpointId", "lastCheckpointDuration", "lastCheckpointSize")
	if err != nil {
		return
	}
	if id, err := strconv.ParseInt(m["lastCompletedCheckpointId"], 10, 64); err == nil && id >= 0 {
		d, _ := strconv.ParseInt(m["lastCheckpointDuration"], 10, 64)
		size, _ := strconv.ParseInt(m["lastCheckpointSize"], 10, 64)
		j.LastCheckpointID, j.LastCheckpointDuration, j.LastCheckpointSize = &id, &d, &size
	}
}

// highAvailabilityOn says whether the configuration has high
// availability: list then asks the leader found through ZooKeeper.
func highAvailabilityOn(conf *config.Configuration) (bool, error) {
	cfg, err := ha.ClientConfigFrom(conf)
	return cfg != nil, err
}

func category(state string) string {
	switch state {
	case "CREATED", "INITIALIZING":
		return "scheduled"
	case "FINISHED", "CANCELED", "FAILED":
		return "terminated"
	}
	return "running"
}

func runList(f *Factory, o *ListOptions) error {
	// -o wide: list's table with each running job's throughput and last
	// checkpoint.
	wide := o.Global.Output == "wide"
	g := *o.Global
	if wide {
		g.Output = ""
	}
	out, err := newOutput(f, &g)
	if err != nil {
		return err
	}
	stats := wide || out.json
	// The configuration and --timeout are checked before anything is
	// printed, as the other verbs check them, even where list does not
	// wait (the registry).
	conf, err := loadConfig(f, o.Global, newLogger(f.IO.ErrOut, logLevel(f)))
	if err != nil {
		return err
	}
	if err := validateConfig(conf, newLogger(f.IO.ErrOut, logLevel(f))); err != nil {
		return err
	}
	if _, err := timeoutFor(f, &o.clientOptions, conf); err != nil {
		return err
	}
	out.println("Waiting for response...")
	var jobs []listedJob
	haOn := false
	if o.Global.JobManager == "" {
		if haOn, err = highAvailabilityOn(conf); err != nil {
			return err
		}
	}
	if haOn {
		if jobs, err = haJobs(f, o, stats, conf); err != nil {
			return err
		}
	} else if o.Global.JobManager != "" {
		s, err := connectWith(f, &o.clientOptions, "", conf)
		if err != nil {
			return err
		}
		defer s.cancel()
		ov, err := s.client.JobsOverview(s.ctx)
		if err != nil {
			return s.explain(err, "Failed to retrieve job list")
		}
		for _, j := range ov {
			lj := listedJob{JobID: j.JID, Name: j.Name, State: j.State, StartTime: j.StartTime, EndTime: j.EndTime, Endpoint: s.client.Base}
			if stats && jobIDPattern.MatchString(j.JID) {
				addStats(s.ctx, s.client, &lj)
			}
			jobs = append(jobs, lj)
		}
	} else {
		reg := jobregistry.NewRegistry(jobregistry.Home(f.Getenv))
		if err := reg.Configure(conf); err != nil {
			return err
		}
		log := newLogger(f.IO.ErrOut, logLevel(f))
		reg.Warn = func(msg string) { log.Warn(msg) }
		if o.Clear {
			cleared, err := reg.Clear()
			if err != nil {
				return fmt.Errorf("Failed to clear the ended jobs: %w", err)
			}
			log.Info(fmt.Sprintf("Removed the registry entries of %d jobs that are not running from %s.", len(cleared), reg.Dir))
		}
		entries, err := reg.List()
		if err != nil {
			return fmt.Errorf("Failed to retrieve job list: %w", err)
		}
		for _, e := range entries {
			lj := listedJob{JobID: e.JobID, Name: e.Name, State: e.State, StartTime: e.StartTime, EndTime: e.EndTime, Endpoint: e.Address}
			if stats && category(e.State) == "running" && jobIDPattern.MatchString(e.JobID) {
				// Through the same checks as every verb: the entry's
				// process alive, its endpoint proving it holds the token.
				if s, err := connectWith(f, &o.clientOptions, e.JobID, conf); err == nil {
					addStats(s.ctx, s.client, &lj)
					s.cancel()
				}
			}
			jobs = append(jobs, lj)
		}
	}
	// A job id is printed only if it is one: an endpoint (or the job
	// result store) could answer with anything, and scripts build paths
	// from what list prints.
	jobs = slices.DeleteFunc(jobs, func(j listedJob) bool {
		if jobIDPattern.MatchString(j.JobID) {
			return false
		}
		newLogger(f.IO.ErrOut, logLevel(f)).Warn(fmt.Sprintf("Ignoring a job whose id %q is not a job id (32 hexadecimal digits).", j.JobID))
		return true
	})
	showRunning, showScheduled, showTerminated := true, true, false
	if o.All {
		showTerminated = true
	} else if o.Running || o.Scheduled {
		showRunning, showScheduled = o.Running, o.Scheduled
	}
	// Flink's order: by state name, then (stably) by start time.
	slices.SortStableFunc(jobs, func(a, b listedJob) int { return strings.Compare(strings.ToLower(a.State), strings.ToLower(b.State)) })
	slices.SortStableFunc(jobs, func(a, b listedJob) int { return int(a.StartTime - b.StartTime) })
	var running, scheduled, terminated []listedJob
	for _, j := range jobs {
		switch category(j.State) {
		case "scheduled":
			scheduled = append(scheduled, j)
		case "terminated":
			terminated = append(terminated, j)
		default:
			running = append(running, j)
		}
	}
	if out.json {
		var sel []listedJob
		if showRunning {
			sel = append(sel, running...)
		}
		if showScheduled {
			sel = append(sel, scheduled...)
		}
		if showTerminated {
			sel = append(sel, terminated...)
		}
		if sel == nil {
			sel = []listedJob{}
		}
		out.json = true
		out.result(sel)
		return nil
	}
	if wide || f.IO.OutTTY && !f.IO.NoColor {
		printJobTable(f.IO.Out, running, scheduled, terminated, showRunning, showScheduled, showTerminated, wide)
		return nil
	}
	w := f.IO.Out
	section := func(title, empty string, js []listedJob, always bool) {
		if len(js) == 0 {
			if always {
				fmt.Fprintln(w, empty)
			}
			return
		}
		fmt.Fprintln(w, title)
		for _, j := range js {
			fmt.Fprintf(w, "%s : %s : %s (%s)\n", time.UnixMilli(j.StartTime).Format("02.01.2006 15:04:05"), j.JobID, j.Name, j.State)
			if j.Standbys != nil {
				fmt.Fprintf(w, "    led by process %s, %d standing by\n", j.Leader, *j.Standbys)
			}
		}
		fmt.Fprintln(w, strings.Repeat("-", 62))
	}
	if showRunning {
		section("------------------ Running/Restarting Jobs -------------------", "No running jobs.", running, true)
	}
	if showScheduled {
		section("----------------------- Scheduled Jobs -----------------------", "No scheduled jobs.", scheduled, true)
	}
	if showTerminated {
		section("---------------------- Terminated Jobs -----------------------", "", terminated, false)
	}
	return nil
}

// printJobTable is list's terminal form: one table, states in colour.
func printJobTable(w io.Writer, running, scheduled, terminated []listedJob, r, s, t, wide bool) {
	var rows []listedJob
	if r {
		rows = append(rows, running...)
	}
	if s {
		rows = append(rows, scheduled...)
	}
	if t {
		rows = append(rows, terminated...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "No running jobs.")
		return
	}
	tw := tablewriter.NewWriter(w)
	if !wide {
		tw.Header("Start time", "Job ID", "Name", "State", "Endpoint")
		for _, j := range rows {
			tw.Append(time.UnixMilli(j.StartTime).Format("02.01.2006 15:04:05"), j.JobID, j.Name, colorState(j.State), j.Endpoint)
		}
		tw.Render()
		return
	}
	tw.Header("Start time", "Job ID", "Name", "State", "Records in", "Records out", "Last checkpoint", "Endpoint")
	rate := func(x *float64) string {
		if x == nil {
			return "-"
		}
		return humanCount(*x) + "/s"
	}
	for _, j := range rows {
		ck := "-"
		if j.LastCheckpointID != nil {
			ck = fmt.Sprintf("%d: %d ms, %s", *j.LastCheckpointID, *j.LastCheckpointDuration, humanBytes(*j.LastCheckpointSize))
		}
		tw.Append(time.UnixMilli(j.StartTime).Format("02.01.2006 15:04:05"), j.JobID, j.Name, colorState(j.State),
			rate(j.RecordsInPerSecond), rate(j.RecordsOutPerSecond), ck, j.Endpoint)
	}
	tw.Render()
}

func colorState(s string) string {
	switch s {
	case "RUNNING":
		return color.GreenString(s)
	case "FINISHED":
		return color.BlueString(s)
	case "FAILED", "FAILING":
		return color.RedString(s)
	case "CANCELED", "CANCELLING", "RESTARTING":
		return color.YellowString(s)
	}
	return s
}

// haJobs lists the cluster's job, asking the leader found through
// ZooKeeper, or the job result store once the job has ended.
func haJobs(f *Factory, o *ListOptions, stats bool, conf *config.Configuration) ([]listedJob, error) {
	s, err := connectWith(f, &o.clientOptions, "", conf)
	var ended *jobEndedError
	if errors.As(err, &ended) {
		return []listedJob{{JobID: ended.JobID, Name: ended.Name, State: ended.State, StartTime: ended.Start, EndTime: ended.End}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer s.cancel()
	ov, err := s.client.JobsOverview(s.ctx)
	if err != nil {
		return nil, s.explain(err, "Failed to retrieve job list")
	}
	var jobs []listedJob
	for _, j := range ov {
		lj := listedJob{JobID: j.JID, Name: j.Name, State: j.State, StartTime: j.StartTime, EndTime: j.EndTime, Endpoint: s.client.Base,
			Leader: fmt.Sprintf("%d@%s", s.leader.info.PID, s.leader.info.Host), Standbys: new(s.leader.standbys())}
		if stats && jobIDPattern.MatchString(j.JID) {
			addStats(s.ctx, s.client, &lj)
		}
		jobs = append(jobs, lj)
	}
	return jobs, nil
}
