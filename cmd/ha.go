package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/checkpoint"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint"
	"github.com/gflink/gflink/savepoint/vfs"
)

// haConfig reads high availability for run and checks what it needs of the
// rest of the configuration: nil when it is off. As in Flink, HA does not
// need execution.checkpointing.dir: without one, checkpoints go to the
// cluster's storage in high-availability.storageDir, which every process
// of the cluster reads (Flink keeps the checkpoints' metadata there). An
// explicit jobmanager (in-memory) storage is refused: a standby could not
// read what a dead leader kept in its memory.
func haConfig(conf *config.Configuration, log *slog.Logger) (*ha.Config, error) {
	cfg, err := ha.ConfigFrom(conf)
	if err != nil || cfg == nil {
		return nil, err
	}
	cp, _, err := checkpoint.ConfigFrom(conf)
	if err != nil {
		return nil, err
	}
	switch {
	case !cp.Enabled():
		log.Warn("High availability is on but checkpointing is off (execution.checkpointing.interval): a standby that takes the job over starts it from the beginning.")
	case cp.Storage == checkpoint.StorageFilesystem:
	default:
		if _, set, _ := checkpoint.StorageOption.Lookup(conf); set {
			return nil, fmt.Errorf("high-availability.type ZOOKEEPER needs checkpoints every process of the cluster can read, but %s is jobmanager (from %s): a standby cannot read what a dead leader kept in memory. Set it to filesystem (with execution.checkpointing.dir on storage they share), or leave both unset to keep checkpoints in high-availability.storageDir",
				checkpoint.StorageOption.Key(), checkpoint.StorageOption.Origin(conf))
		}
		dir := cfg.CheckpointDir()
		conf.SetString(checkpoint.Dir.Key(), dir, "high-availability.storageDir")
		log.Info(fmt.Sprintf("Checkpoints go to %s, in high-availability.storageDir, where every process of cluster %s reads them (execution.checkpointing.dir is not set).", dir, cfg.ClusterID))
	}
	return cfg, nil
}

// haRun is one process of a high-availability cluster: it contends for
// the leadership, runs the job while it leads, and contends again when it
// loses it, until the job reaches a globally terminal state (its own, or
// another leader's, found in the job result store).
type haRun struct {
	sub     *submission
	o       *RunOptions
	cfg     *ha.Config
	log     *slog.Logger
	restore *restoreSource // -s: used only if no checkpoint is registered
	told    bool           // standing by was announced
	secret  *ha.Secret
}

func runHA(sub *submission, o *RunOptions, cfg *ha.Config, src *restoreSource, log *slog.Logger) error {
	r := &haRun{sub: sub, o: o, cfg: cfg, log: log, restore: src}
	secret, err := ha.PrepareStorage(cfg)
	if err != nil {
		return err
	}
	r.secret = secret
	first := true
	for {
		svc, err := ha.Connect(sub.f.Context, cfg, secret, log)
		if err != nil {
			if sub.f.Context.Err() != nil {
				return canceled(r.sub.f.Context)
			}
			if first {
				return err // a bad quorum is the user's to fix
			}
			log.Warn(fmt.Sprintf("Could not reconnect to ZooKeeper, retrying in %s: %v", config.FormatDuration(cfg.RetryWait), err))
			select {
			case <-time.After(cfg.RetryWait):
				continue
			case <-sub.f.Context.Done():
				return canceled(r.sub.f.Context)
			}
		}
		first = false
		done, err := r.term(svc)
		svc.Close()
		if done {
			return err
		}
	}
}

// term is one session: contend, lead, lose. done reports that the process
// is finished with err as its result.
func (r *haRun) term(svc *ha.Services) (done bool, err error) {
	jobID := r.sub.opts.JobID
	if res, err := svc.JobResult(jobID); err != nil || res != nil {
		return true, r.ended(res, err)
	}
	host, _ := os.Hostname()
	lead, err := svc.Contend(r.sub.f.Context, ha.Candidate{PID: os.Getpid(), Host: host}, func(ahead int) { r.standby(svc, ahead) })
	if err != nil {
		if r.sub.f.Context.Err() != nil {
			return true, canceled(r.sub.f.Context)
		}
		r.log.Warn(fmt.Sprintf("Lost the ZooKeeper session while standing by (%v); contending again.", err))
		return false, nil
	}
	// Leading. The job may have ended under a leader before.
	if res, err := svc.JobResult(jobID); err != nil || res != nil {
		lead.Release()
		return true, r.ended(res, err)
	}
	r.log.Info(fmt.Sprintf("This process leads cluster %s (%s): running job %s.", r.cfg.ClusterID, lead, jobID))
	res, err := r.lead(svc, lead)
	if err != nil {
		lead.Release()
		return true, err
	}
	if res.Status == engine.StatusSuspended {
		if r.sub.f.Context.Err() != nil {
			// Asked to stop: the session closes with the process, and a
			// standby takes over at once.
			r.log.Warn(fmt.Sprintf("Handing job %s over: this process was asked to stop; a standby of cluster %s takes over from the latest registered checkpoint.", jobID, r.cfg.ClusterID))
			return true, canceled(r.sub.f.Context)
		}
		// Lost the leadership: the job is another process's now, or ours
		// again once we win it back.
		r.log.Warn(fmt.Sprintf("Lost leadership of cluster %s: job %s is suspended here, and the leader that takes over recovers it; this process stands by.", r.cfg.ClusterID, jobID))
		r.told = false
		return false, nil
	}
	lead.Release()
	return true, reportResult(r.sub.f, r.sub.out, res)
}

// standby tells the user, and a detached parent, that another process
// leads.
func (r *haRun) standby(svc *ha.Services, ahead int) {
	if r.told {
		return
	}
	r.told = true
	who := "another gflink process"
	if info, err := svc.Leader(); err == nil {
		who = fmt.Sprintf("process %d on %s (%s)", info.PID, info.Host, info.Address)
	}
	msg := fmt.Sprintf("Standing by for job %s: %s leads cluster %s; %d candidate(s) ahead of this one. This process takes the job over when the leader's ZooKeeper session ends.",
		r.sub.opts.JobID, who, r.cfg.ClusterID, ahead)
	if r.sub.report != nil {
		r.sub.report.standingBy(r.sub.opts.JobID, msg)
	}
	r.sub.out.println("%s", msg)
	if r.sub.out.json {
		r.log.Info(msg) // stdout carries the one JSON object
	}
}

// ended is how a process finds the job over: recorded in the job result
// store by a leader. There is nothing to run; that is no error.
func (r *haRun) ended(res *ha.JobResult, err error) error {
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Job %s already reached the globally terminal state %s (recorded in the job result store of cluster %s): nothing to run.", res.JobID, res.Status, r.cfg.ClusterID)
	if r.sub.report != nil {
		r.sub.report.standingBy(res.JobID, msg)
	}
	r.sub.out.println("%s", msg)
	r.sub.out.result(map[string]any{"jobId": res.JobID, "status": res.Status, "alreadyEnded": true})
	return nil
}

// lead runs the job while this process leads: the stored job graph, from
// the latest registered checkpoint, with every checkpoint id, checkpoint
// and commit fenced by the leadership. It returns when the job ends or is
// suspended.
func (r *haRun) lead(svc *ha.Services, lead *ha.Leadership) (engine.JobResult, error) {
	sub, jobID := r.sub, r.sub.opts.JobID
	stores, err := lead.ForJob(jobID)
	if err != nil {
		return engine.JobResult{}, err
	}
	if err := r.jobGraph(svc, stores); err != nil {
		return engine.JobResult{}, err
	}
	if err := r.recover(svc); err != nil {
		return engine.JobResult{}, err
	}
	next, err := svc.CheckpointIDCounter(jobID)
	if err != nil {
		return engine.JobResult{}, err
	}
	sub.opts.HA, sub.opts.FirstCheckpointID = stores, next
	if !sub.srvOpts.DisableAuthentication {
		sub.srvOpts.Token = r.secret.RESTToken()
	}
	// The job outlives neither the leadership nor this process's wish to
	// stop: both suspend it (a stopped leader hands the job over; only
	// `gflink cancel` ends it everywhere).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := sub.start(ctx)
	if err != nil {
		return engine.JobResult{}, err
	}
	defer st.srv.Close()
	host, _ := os.Hostname()
	if err := lead.Publish(ha.LeaderInfo{Address: st.srv.Address(), JobID: jobID, JobName: sub.graph.Name, PID: os.Getpid(), Host: host}); err != nil {
		st.job.Suspend(err)
	}
	go func() {
		select {
		case <-lead.Lost():
			st.job.Suspend(lead.LostCause())
		case <-sub.f.Context.Done():
			st.job.Suspend(errors.New("this process was asked to stop"))
		case <-st.job.Done():
		}
	}()
	select {
	case <-st.running:
		sub.reportRunning()
	case <-st.job.Done():
	}
	res := st.job.Wait()
	if res.Status.IsGloballyTerminal() {
		st.srv.WaitFetched(10 * time.Second)
		if err := stores.CleanUp(); err != nil {
			r.log.Warn("Could not clean up the job's high-availability data: " + err.Error())
		}
	}
	return res, nil
}

// jobGraph makes the stored job graph the one to run: the first leader
// stores its own; a later one runs what was stored, whatever its own
// command line says (Flink's job graph store).
func (r *haRun) jobGraph(svc *ha.Services, stores *ha.JobStores) error {
	sub, o := r.sub, r.o
	stored, err := svc.SubmittedJob(sub.opts.JobID)
	if err != nil {
		return err
	}
	if stored != nil {
		stores.Describe(sub.graph.Name, stored.Submitted)
	}
	if stored == nil {
		stores.Describe(sub.graph.Name, time.Now().UnixMilli())
		return stores.PutSubmittedJob(ha.SubmittedJob{JobID: sub.opts.JobID, Job: o.Job, Args: o.Args, Parallelism: o.Parallelism, Submitted: time.Now().UnixMilli()})
	}
	if stored.Job == o.Job && slices.Equal(stored.Args, o.Args) && stored.Parallelism == o.Parallelism {
		return nil
	}
	r.log.Warn(fmt.Sprintf("Running the job stored for cluster %s (%s %s), not this command line's (%s %s).",
		r.cfg.ClusterID, stored.Job, strings.Join(config.MaskArgs(stored.Args), " "), o.Job, strings.Join(config.MaskArgs(o.Args), " ")))
	so := *o
	so.Job, so.Args, so.Parallelism = stored.Job, stored.Args, stored.Parallelism
	if stored.Parallelism != "" {
		sub.opts.Config.SetString(engine.Parallelism.Key(), stored.Parallelism, "the stored job graph")
	}
	g, err := buildGraph(sub.f, &so, sub.opts.Config, sub.out)
	if err != nil {
		return fmt.Errorf("rebuild the stored job graph: %w", err)
	}
	sub.graph, sub.args = g, stored.Args
	return nil
}

// recover picks what the job starts from: the latest checkpoint registered
// in ZooKeeper — never one written but not registered — else -s on the
// first submission, else nothing.
func (r *haRun) recover(svc *ha.Services) error {
	sub := r.sub
	cps, cerr := svc.Checkpoints(sub.opts.JobID)
	if cerr != nil {
		return cerr
	}
	sub.opts.Restore, sub.notices = nil, nil
	if len(cps) == 0 {
		if r.restore != nil {
			sub.opts.Restore, sub.opts.AllowNonRestoredState, sub.opts.ClaimMode = r.restore.Resolved, r.restore.AllowNonRestoredState, r.restore.ClaimMode
			sub.notices = restoreNotices(r.restore, sub.opts.Config)
		}
		return nil
	}
	latest := cps[len(cps)-1]
	// What the seal vouches for is read from directories nobody else can
	// change (the checkpoint storage makes them owner-only), so that the
	// files read after the check are the ones checked.
	err := vfs.CheckPrivate(vfs.Default, latest.Dir, "the registered checkpoint's directory")
	if err == nil {
		err = vfs.CheckParent(vfs.Default, filepath.Dir(latest.Dir), "the directory of the registered checkpoint")
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(latest.Metadata)
	}
	if err == nil {
		err = latest.CheckMetadata(data)
	}
	if err != nil {
		return fmt.Errorf("recover job %s from checkpoint %d registered in ZooKeeper: %w", sub.opts.JobID, latest.ID, err)
	}
	resolved, err := restore.Resolve(sub.f.FS, latest.Metadata)
	if err != nil {
		// Falling back to an older checkpoint would repeat what the
		// latest one's sinks committed.
		return fmt.Errorf("recover job %s from checkpoint %d registered in ZooKeeper: %w", sub.opts.JobID, latest.ID, err)
	}
	if err := restore.VerifyStateFiles(sub.f.FS, resolved.Dir, resolved.Metadata); err != nil {
		return fmt.Errorf("recover job %s from checkpoint %d registered in ZooKeeper: %w", sub.opts.JobID, latest.ID, err)
	}
	sub.opts.Restore, sub.opts.AllowNonRestoredState = resolved, false
	// The job's own checkpoints are its to delete; a savepoint is not.
	sub.opts.ClaimMode = engine.ClaimModeClaim
	if latest.Savepoint {
		sub.opts.ClaimMode = engine.ClaimModeNoClaim
	}
	sub.notices = []string{fmt.Sprintf("Recovering job %s from checkpoint %d registered in ZooKeeper: %s", sub.opts.JobID, latest.ID, savepoint.URI(resolved.Dir))}
	return nil
}

// haLeader finds the cluster's leader through ZooKeeper (Flink's leader
// retrieval) for the CLI: its published address, the cluster's token and
// the contending processes.
type haLeader struct {
	cfg        *ha.Config
	info       *ha.LeaderInfo
	token      string
	candidates []ha.Candidate
}

func findLeader(ctx context.Context, cfg *ha.Config, auth bool) (*haLeader, error) {
	secret, err := clientSecret(cfg)
	if err != nil {
		return nil, err
	}
	svc, err := ha.Connect(ctx, cfg, secret, nil)
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	l := &haLeader{cfg: cfg}
	if l.candidates, err = svc.Candidates(); err != nil {
		return nil, err
	}
	l.info, err = svc.Leader()
	if errors.Is(err, ha.ErrNoLeader) {
		if res, rerr := svc.JobResult(cfg.JobID); rerr == nil && res != nil {
			return nil, &jobEndedError{JobID: res.JobID, State: res.Status, Name: res.Name, Start: res.Start, End: res.Time}
		}
		return nil, fmt.Errorf("No gflink process leads cluster %s (high-availability.cluster-id) in ZooKeeper at %s right now (%d standing by); try again once a standby has taken over.",
			cfg.ClusterID, strings.Join(cfg.Servers, ","), len(l.candidates))
	}
	if err != nil {
		return nil, err
	}
	if auth {
		if secret == nil {
			return nil, fmt.Errorf("The leader of cluster %s requires the cluster's REST token, which is derived from the cluster's secret in high-availability.storageDir (%s), and this user cannot read it. Run the command as the cluster's user, or with -Drest.authentication.enabled=false if the cluster runs so.", cfg.ClusterID, cfg.StorageDir)
		}
		l.token = secret.RESTToken()
	}
	return l, nil
}

// clientSecret reads the cluster's secret for the CLI: it authenticates the
// CLI to ZooKeeper (acl creator) and yields the REST token. With the open
// ACL and no secret readable, the CLI can still read ZooKeeper.
func clientSecret(cfg *ha.Config) (*ha.Secret, error) {
	secret, err := ha.ReadSecret(cfg)
	if err == nil {
		return secret, nil
	}
	if cfg.ACL == ha.ACLOpen || cfg.Digest != "" {
		return nil, nil
	}
	return nil, fmt.Errorf("%w\nThe CLI reaches a high-availability cluster through ZooKeeper, whose znodes only the cluster's processes can read (high-availability.zookeeper.client.acl: creator): it authenticates with the cluster's secret, kept in high-availability.storageDir/<cluster-id>. Give it the same high-availability.storageDir and high-availability.cluster-id as the cluster's processes (in flink-conf.yaml or with -D), and run it as their user.", err)
}

// standbys is how many processes stand by behind the leader.
func (l *haLeader) standbys() int { return max(len(l.candidates)-1, 0) }

// rediscover waits for the cluster to publish a leader other than the
// one that refused the connection (a standby taking over, possibly at the
// same address), polling ZooKeeper until ctx ends.
func rediscover(cfg *ha.Config, current *ha.LeaderInfo, token string) func(ctx context.Context, failed string) (string, string, error) {
	return func(ctx context.Context, failed string) (string, string, error) {
		secret, err := clientSecret(cfg)
		if err != nil {
			return "", "", err
		}
		svc, err := ha.Connect(ctx, cfg, secret, nil)
		if err != nil {
			return "", "", err
		}
		defer svc.Close()
		for {
			info, err := svc.Leader()
			if err == nil && (info.PID != current.PID || info.Host != current.Host || info.Address != current.Address) {
				*current = *info
				return info.Address, token, nil
			}
			if err != nil && !errors.Is(err, ha.ErrNoLeader) {
				return "", "", err
			}
			select {
			case <-ctx.Done():
				return "", "", fmt.Errorf("no other leader of cluster %s appeared in ZooKeeper in time (a killed leader is replaced once its session times out: high-availability.zookeeper.client.session-timeout)", cfg.ClusterID)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
