package cmd

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fatih/color"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
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
	out, err := newOutput(f, o.Global)
	if err != nil {
		return err
	}
	// The configuration and --timeout are checked before anything is
	// printed, as the other verbs check them, even where list does not
	// wait (the registry).
	conf, err := loadConfig(f, o.Global, newLogger(f.IO.ErrOut, logLevel(f)))
	if err != nil {
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
		if jobs, err = haJobs(f, o); err != nil {
			return err
		}
	} else if o.Global.JobManager != "" {
		s, err := connect(f, &o.clientOptions, "")
		if err != nil {
			return err
		}
		defer s.cancel()
		ov, err := s.client.JobsOverview(s.ctx)
		if err != nil {
			return s.explain(err, "Failed to retrieve job list")
		}
		for _, j := range ov {
			jobs = append(jobs, listedJob{JobID: j.JID, Name: j.Name, State: j.State, StartTime: j.StartTime, EndTime: j.EndTime, Endpoint: s.client.Base})
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
			jobs = append(jobs, listedJob{JobID: e.JobID, Name: e.Name, State: e.State, StartTime: e.StartTime, EndTime: e.EndTime, Endpoint: e.Address})
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
	if f.IO.OutTTY && !f.IO.NoColor {
		printJobTable(f.IO.Out, running, scheduled, terminated, showRunning, showScheduled, showTerminated)
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
func printJobTable(w io.Writer, running, scheduled, terminated []listedJob, r, s, t bool) {
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
	tw.Header("Start time", "Job ID", "Name", "State", "Endpoint")
	for _, j := range rows {
		tw.Append(time.UnixMilli(j.StartTime).Format("02.01.2006 15:04:05"), j.JobID, j.Name, colorState(j.State), j.Endpoint)
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
func haJobs(f *Factory, o *ListOptions) ([]listedJob, error) {
	s, err := connect(f, &o.clientOptions, "")
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
		jobs = append(jobs, listedJob{JobID: j.JID, Name: j.Name, State: j.State, StartTime: j.StartTime, EndTime: j.EndTime, Endpoint: s.client.Base,
			Leader: fmt.Sprintf("%d@%s", s.leader.info.PID, s.leader.info.Host), Standbys: new(s.leader.standbys())})
	}
	return jobs, nil
}
