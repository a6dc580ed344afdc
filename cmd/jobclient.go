package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/rest"
	"github.com/spf13/cobra"
)

var jobIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

// parseJobID checks a job id with Flink's message; ids are printed lower
// case.
func parseJobID(s string) (string, error) {
	if !jobIDPattern.MatchString(s) {
		return "", usageErrorf("Cannot parse JobID from \"%s\". The expected format is [0-9a-fA-F]{32}, e.g. fd72014d4c864993a2e5a9287b4a9c5d.", s)
	}
	return strings.ToLower(s), nil
}

// jobIDArg sets the job id of stop and cancel from their arguments, with
// Flink's quirk for their option with an optional argument (stop -p,
// cancel -s): "stop -p <jobId>" makes the job id the option's value; with
// no argument left, that value is the job id and the option is given
// without a directory (the default one is used). It reports false when
// there is no job id.
func jobIDArg(args []string, optSet bool, optValue, jobID *string) bool {
	switch {
	case len(args) > 0:
		*jobID = args[0]
	case optSet && *optValue != "":
		*jobID, *optValue = *optValue, ""
	default:
		return false
	}
	return true
}

// jobOutput begins a verb that addresses one job (cancel, checkpoint,
// savepoint, stop): it checks the job id, lower-casing it in place as ids
// are printed, and then the output format — in that order, which decides
// the error reported when both are wrong.
func jobOutput(f *Factory, g *globalOptions, jobID *string) (output, error) {
	id, err := parseJobID(*jobID)
	if err != nil {
		return output{}, err
	}
	*jobID = id
	return newOutput(f, g)
}

// clientOptions are the options every verb that talks to a job shares.
type clientOptions struct {
	Global  *globalOptions
	Timeout string
}

func addTimeoutFlag(c *cobra.Command, o *clientOptions) {
	c.Flags().StringVar(&o.Timeout, "timeout", "", "How long to wait for an answer, e.g. 30s (default: client.timeout, 60 s)")
	c.Flags().SetAnnotation("timeout", "argname", []string{"duration"})
}

// session is what a verb needs to talk to one job.
type session struct {
	conf    *config.Configuration
	client  *rest.Client
	entry   *jobregistry.Entry // nil with -m
	leader  *haLeader          // the leader found through ZooKeeper, or nil
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
}

// timeoutFor reads --timeout, else client.timeout.
func timeoutFor(f *Factory, o *clientOptions, conf *config.Configuration) (time.Duration, error) {
	if o.Timeout != "" {
		d, err := config.ParseDuration(o.Timeout)
		if err != nil {
			return 0, usageErrorf("Invalid --timeout '%s': %v", o.Timeout, err)
		}
		return d, nil
	}
	return rest.ClientTimeout.Get(conf)
}

// connect finds the endpoint of a job: with -m host:port that endpoint (a
// gflink job or a Flink cluster), else the process registered under
// $GFLINK_HOME/jobs.
func connect(f *Factory, o *clientOptions, jobID string) (*session, error) {
	conf, err := loadConfig(f, o.Global, newLogger(f.IO.ErrOut, logLevel(f)))
	if err != nil {
		return nil, err
	}
	if err := validateConfig(conf, newLogger(f.IO.ErrOut, logLevel(f))); err != nil {
		return nil, err
	}
	return connectWith(f, o, jobID, conf)
}

// connectWith is connect with the configuration already loaded and
// checked: list connects to each running job, and would otherwise warn
// about the same configuration once per job.
func connectWith(f *Factory, o *clientOptions, jobID string, conf *config.Configuration) (*session, error) {
	timeout, err := timeoutFor(f, o, conf)
	if err != nil {
		return nil, err
	}
	s := &session{timeout: timeout, conf: conf}
	reg := jobregistry.NewRegistry(jobregistry.Home(f.Getenv))
	haCfg, err := ha.ClientConfigFrom(conf)
	if err != nil {
		return nil, err
	}
	if o.Global.JobManager == "" && haCfg != nil {
		// High availability: the leader, wherever it runs now.
		auth, err := rest.AuthenticationEnabled.Get(conf)
		if err != nil {
			return nil, err
		}
		l, err := findLeader(f.Context, haCfg, auth)
		if err != nil {
			return nil, err
		}
		if jobID != "" && jobID != l.info.JobID {
			return nil, fmt.Errorf("Job %s not found: cluster %s (high-availability.cluster-id) runs job %s. Use -m host:port to address another endpoint.", jobID, haCfg.ClusterID, l.info.JobID)
		}
		s.leader, s.client = l, rest.NewClient(l.info.Address)
		// The address is ZooKeeper's word: the endpoint there proves it is
		// the cluster's before the token goes to it.
		s.client.Token, s.client.Prove = l.token, true
		s.client.Rediscover = rediscover(haCfg, l.info, l.token)
		// A dead leader's address leaves ZooKeeper with its session, and
		// a standby publishes its own soon after.
		s.client.ImpostorWait = haCfg.SessionTimeout + 2*time.Second
		s.ctx, s.cancel = context.WithTimeout(f.Context, timeout)
		return s, nil
	}
	if o.Global.JobManager != "" {
		s.client = rest.NewClient(o.Global.JobManager)
		s.client.Token, s.client.Prove = restToken(f, o.Global, reg, s.client.Base)
		s.client.AllowUnproven = s.client.Prove // a registered job's, checked
	} else if jobID != "" {
		e, err := reg.Get(jobID)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("Job %s not found: no gflink process runs it (jobs register in %s). Use -m host:port to address a Flink cluster or another endpoint.", jobID, reg.Dir)
		}
		if err != nil {
			return nil, err
		}
		if e.Terminal() {
			return nil, &jobEndedError{JobID: jobID, State: e.State}
		}
		if err := reg.Check(e); err != nil {
			return nil, err
		}
		s.entry, s.client = e, rest.NewClient(e.Address)
		// The entry was checked (Check), and its endpoint proves it holds
		// the token before getting it.
		s.client.Token, s.client.Prove, s.client.AllowUnproven = e.Token, true, true
	}
	s.ctx, s.cancel = context.WithTimeout(f.Context, timeout)
	if s.entry != nil {
		if err := s.checkEndpoint(reg, jobID); err != nil {
			s.cancel()
			return nil, err
		}
	}
	return s, nil
}

// restToken is the token to send to the endpoint at base given with -m:
// --token, else $GFLINK_REST_TOKEN, else the token of a job registered at
// that address. None is sent otherwise: a token is never handed to an
// endpoint it was not made for. prove says that the endpoint must prove
// it holds the token first: a registered job's does; one the user named
// with a token of their own may be a Flink cluster, which cannot.
func restToken(f *Factory, g *globalOptions, reg *jobregistry.Registry, base string) (token string, prove bool) {
	if g.Token != "" {
		return g.Token, false
	}
	if t := f.Getenv(restTokenEnv); t != "" {
		return t, false
	}
	entries, _ := reg.List()
	for _, e := range entries {
		if !e.Terminal() && e.Token != "" && rest.NewClient(e.Address).Base == base {
			return e.Token, true
		}
	}
	return "", false
}

// restTokenEnv holds the token for -m, for scripts that get it elsewhere.
const restTokenEnv = "GFLINK_REST_TOKEN"

// checkEndpoint asks the registered endpoint for the entry's job: an
// endpoint that does not know the job, or refuses the entry's token, is not
// the process that registered it, and is not used. An unreachable one is
// left to the command, which reports it as it always has.
func (s *session) checkEndpoint(reg *jobregistry.Registry, jobID string) error {
	_, err := s.client.JobStatus(s.ctx, jobID)
	var ae *rest.APIError
	if !errors.As(err, &ae) {
		return nil
	}
	reason := fmt.Sprintf("the endpoint %s answers %d: %s", s.entry.Address, ae.Status, ae.Msg)
	switch ae.Status {
	case http.StatusNotFound:
		reason = fmt.Sprintf("the endpoint %s does not serve job %s", s.entry.Address, jobID)
	case http.StatusUnauthorized:
		reason = fmt.Sprintf("the endpoint %s refuses the entry's token", s.entry.Address)
	}
	return &jobregistry.ForgedEntryError{JobID: jobID, File: filepath.Join(reg.Dir, jobID+".json"), Reason: reason}
}

// jobEndedError: the registry says the job has ended.
type jobEndedError struct {
	JobID, State string
	// From the job result store (high availability), when known.
	Name       string
	Start, End int64
}

func (e *jobEndedError) Error() string {
	return fmt.Sprintf("Job %s is not running: it ended %s.", e.JobID, e.State)
}

// explain turns a client error into one clear line.
func (s *session) explain(err error, what string) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: timed out after %s (set --timeout or client.timeout to wait longer)", what, fmtDuration(s.timeout))
	case errors.Is(err, context.Canceled):
		return canceled(s.ctx)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func fmtDuration(d time.Duration) string { return config.FormatDuration(d) }

// savepointDir is the directory to send for a savepoint: the one given,
// else the client's execution.checkpointing.savepoint-dir, else none (the
// job's own default then applies).
func (s *session) savepointDir(given string) string {
	if given != "" {
		return absPath(given)
	}
	if d, err := checkpoint.SavepointDir.Get(s.conf); err == nil && d != "" {
		return absPath(d)
	}
	return ""
}

// output prints human lines or, with -o json, one JSON object.
type output struct {
	io   *IOStreams
	json bool
}

func newOutput(f *Factory, g *globalOptions) (output, error) {
	switch g.Output {
	case "", "text":
		return output{io: f.IO}, nil
	case "json":
		return output{io: f.IO, json: true}, nil
	}
	return output{}, usageErrorf("Unsupported output format '%s': use -o json (or omit -o for text; list also takes -o wide).", g.Output)
}

// println prints a human line (nothing in JSON mode).
func (o output) println(format string, args ...any) {
	if !o.json {
		fmt.Fprintf(o.io.Out, format+"\n", args...)
	}
}

// result prints the JSON result (nothing in text mode).
func (o output) result(v any) {
	if o.json {
		b, _ := json.Marshal(v)
		fmt.Fprintln(o.io.Out, string(b))
	}
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil && !strings.Contains(p, ":") {
		return a
	}
	return p
}
