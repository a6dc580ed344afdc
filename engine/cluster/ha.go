package cluster

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

// ErrCanceled is RunHA's answer when ctx ended: the process was asked to
// stop, and a standby takes the job over.
var ErrCanceled = errors.New("this process was asked to stop")

// HAConfig reads high availability for run and checks what it needs of the
// rest of the configuration: nil when it is off. As in Flink, HA does not
// need execution.checkpointing.dir: without one, checkpoints go to the
// cluster's storage in high-availability.storageDir, which every process
// of the cluster reads (Flink keeps the checkpoints' metadata there). An
// explicit jobmanager (in-memory) storage is refused: a standby could not
// read what a dead leader kept in its memory.
func HAConfig(conf *config.Configuration, log *slog.Logger) (*ha.Config, error) {
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
	ctx     context.Context
	sub     *Submission
	cfg     *ha.Config
	log     *slog.Logger
	restore *engine.RestoreSource // -s: used only if no checkpoint is registered
	told    bool                  // standing by was announced
	secret  *ha.Secret
}

// RunHA runs the job as one process of a high-availability cluster, until
// the job ends here or under another leader, or ctx ends (ErrCanceled).
// src is what -s named: the job starts from it only if no checkpoint is
// registered. A nil result and error mean there was nothing to run: the
// job had ended (Events.AlreadyEnded said so).
func RunHA(ctx context.Context, sub *Submission, cfg *ha.Config, src *engine.RestoreSource, log *slog.Logger) (*engine.JobResult, error) {
	r := &haRun{ctx: ctx, sub: sub, cfg: cfg, log: log, restore: src}
	secret, err := ha.PrepareStorage(cfg)
	if err != nil {
		return nil, err
	}
	r.secret = secret
	first := true
	for {
		svc, err := ha.Connect(ctx, cfg, secret, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ErrCanceled
			}
			if first {
				return nil, err // a bad quorum is the user's to fix
			}
			log.Warn(fmt.Sprintf("Could not reconnect to ZooKeeper, retrying in %s: %v", config.FormatDuration(cfg.RetryWait), err))
			select {
			case <-time.After(cfg.RetryWait):
				continue
			case <-ctx.Done():
				return nil, ErrCanceled
			}
		}
		first = false
		done, res, err := r.term(svc)
		svc.Close()
		if done {
			return res, err
		}
	}
}

// term is one session: contend, lead, lose. done reports that the process
// is finished, with res and err as its result.
func (r *haRun) term(svc *ha.Services) (done bool, res *engine.JobResult, err error) {
	jobID := r.sub.Options.JobID
	if ended, err := svc.JobResult(jobID); err != nil || ended != nil {
		return true, nil, r.ended(ended, err)
	}
	host, _ := os.Hostname()
	lead, err := svc.Contend(r.ctx, ha.Candidate{PID: os.Getpid(), Host: host}, func(ahead int) { r.standby(svc, ahead) })
	if err != nil {
		if r.ctx.Err() != nil {
			return true, nil, ErrCanceled
		}
		r.log.Warn(fmt.Sprintf("Lost the ZooKeeper session while standing by (%v); contending again.", err))
		return false, nil, nil
	}
	// Leading. The job may have ended under a leader before.
	if ended, err := svc.JobResult(jobID); err != nil || ended != nil {
		lead.Release()
		return true, nil, r.ended(ended, err)
	}
	r.log.Info(fmt.Sprintf("This process leads cluster %s (%s): running job %s.", r.cfg.ClusterID, lead, jobID))
	result, err := r.lead(svc, lead)
	if err != nil {
		lead.Release()
		return true, nil, err
	}
	if result.Status == engine.StatusSuspended {
		if r.ctx.Err() != nil {
			// Asked to stop: the session closes with the process, and a
			// standby takes over at once.
			r.log.Warn(fmt.Sprintf("Handing job %s over: this process was asked to stop; a standby of cluster %s takes over from the latest registered checkpoint.", jobID, r.cfg.ClusterID))
			return true, nil, ErrCanceled
		}
		// Lost the leadership: the job is another process's now, or ours
		// again once we win it back.
		r.log.Warn(fmt.Sprintf("Lost leadership of cluster %s: job %s is suspended here, and the leader that takes over recovers it; this process stands by.", r.cfg.ClusterID, jobID))
		r.told = false
		return false, nil, nil
	}
	lead.Release()
	return true, &result, nil
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
	r.sub.Events.StandingBy(r.sub.Options.JobID, fmt.Sprintf("Standing by for job %s: %s leads cluster %s; %d candidate(s) ahead of this one. This process takes the job over when the leader's ZooKeeper session ends.",
		r.sub.Options.JobID, who, r.cfg.ClusterID, ahead))
}

// ended is how a process finds the job over: recorded in the job result
// store by a leader. There is nothing to run; that is no error.
func (r *haRun) ended(res *ha.JobResult, err error) error {
	if err != nil {
		return err
	}
	r.sub.Events.AlreadyEnded(res.JobID, engine.JobStatus(res.Status), fmt.Sprintf("Job %s already reached the globally terminal state %s (recorded in the job result store of cluster %s): nothing to run.", res.JobID, res.Status, r.cfg.ClusterID))
	return nil
}

// lead runs the job while this process leads: the stored job graph, from
// the latest registered checkpoint, with every checkpoint id, checkpoint
// and commit fenced by the leadership. It returns when the job ends or is
// suspended.
func (r *haRun) lead(svc *ha.Services, lead *ha.Leadership) (engine.JobResult, error) {
	sub, jobID := r.sub, r.sub.Options.JobID
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
	sub.Options.HA, sub.Options.FirstCheckpointID = stores, next
	if !sub.Server.DisableAuthentication {
		sub.Server.Token = r.secret.RESTToken()
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
	defer st.closeReporters()
	if sub.Watch != nil {
		defer sub.Watch(st.job)()
	}
	host, _ := os.Hostname()
	if err := lead.Publish(ha.LeaderInfo{Address: st.srv.Address(), JobID: jobID, JobName: sub.Graph.Name, PID: os.Getpid(), Host: host}); err != nil {
		st.job.Suspend(err)
	}
	go func() {
		select {
		case <-lead.Lost():
			st.job.Suspend(lead.LostCause())
		case <-r.ctx.Done():
			st.job.Suspend(ErrCanceled)
		case <-st.job.Done():
		}
	}()
	select {
	case <-st.running:
		sub.Events.Running(jobID, sub.reached, sub.Notices, sub.endpoint)
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
	sub := r.sub
	stored, err := svc.SubmittedJob(sub.Options.JobID)
	if err != nil {
		return err
	}
	if stored == nil {
		stores.Describe(sub.Graph.Name, time.Now().UnixMilli())
		return stores.PutSubmittedJob(ha.SubmittedJob{JobID: sub.Options.JobID, Job: sub.Job, Args: sub.Args, Parallelism: sub.Parallelism, Submitted: time.Now().UnixMilli()})
	}
	stores.Describe(sub.Graph.Name, stored.Submitted)
	if stored.Job == sub.Job && slices.Equal(stored.Args, sub.Args) && stored.Parallelism == sub.Parallelism {
		return nil
	}
	r.log.Warn(fmt.Sprintf("Running the job stored for cluster %s (%s %s), not this command line's (%s %s).",
		r.cfg.ClusterID, stored.Job, strings.Join(config.MaskArgs(stored.Args), " "), sub.Job, strings.Join(config.MaskArgs(sub.Args), " ")))
	if stored.Parallelism != "" {
		sub.Options.Config.SetString(engine.Parallelism.Key(), stored.Parallelism, "the stored job graph")
	}
	g, err := sub.Rebuild(stored.Job, stored.Args, stored.Parallelism)
	if err != nil {
		return fmt.Errorf("rebuild the stored job graph: %w", err)
	}
	sub.Graph, sub.Job, sub.Args, sub.Parallelism = g, stored.Job, stored.Args, stored.Parallelism
	return nil
}

// recover picks what the job starts from: the latest checkpoint registered
// in ZooKeeper — never one written but not registered — else -s on the
// first submission, else nothing.
func (r *haRun) recover(svc *ha.Services) error {
	sub := r.sub
	cps, cerr := svc.Checkpoints(sub.Options.JobID)
	if cerr != nil {
		return cerr
	}
	sub.Options.Restore, sub.Notices = nil, nil
	if len(cps) == 0 {
		if r.restore != nil {
			sub.Options.Restore, sub.Options.AllowNonRestoredState, sub.Options.ClaimMode = r.restore.Resolved, r.restore.AllowNonRestoredState, r.restore.ClaimMode
			sub.Notices = RestoreNotices(r.restore, sub.Options.Config)
		}
		return nil
	}
	latest := cps[len(cps)-1]
	resolved, err := r.verified(latest)
	if err != nil {
		// Falling back to an older checkpoint would repeat what the
		// latest one's sinks committed.
		return fmt.Errorf("recover job %s from checkpoint %d registered in ZooKeeper: %w", sub.Options.JobID, latest.ID, err)
	}
	sub.Options.Restore, sub.Options.AllowNonRestoredState = resolved, false
	// The job's own checkpoints are its to delete; a savepoint is not.
	sub.Options.ClaimMode = engine.ClaimModeClaim
	if latest.Savepoint {
		sub.Options.ClaimMode = engine.ClaimModeNoClaim
	}
	sub.Notices = []string{fmt.Sprintf("Recovering job %s from checkpoint %d registered in ZooKeeper: %s", sub.Options.JobID, latest.ID, savepoint.URI(resolved.Dir))}
	return nil
}

// verified resolves a registered checkpoint after checking it is the one
// registered: its metadata matches the seal, and every state file is there.
func (r *haRun) verified(latest ha.RegisteredCheckpoint) (*restore.Resolved, error) {
	// What the seal vouches for is read from directories nobody else can
	// change (the checkpoint storage makes them owner-only), so that the
	// files read after the check are the ones checked.
	if err := vfs.CheckPrivate(vfs.Default, latest.Dir, "the registered checkpoint's directory"); err != nil {
		return nil, err
	}
	if err := vfs.CheckParent(vfs.Default, filepath.Dir(latest.Dir), "the directory of the registered checkpoint"); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(latest.Metadata)
	if err != nil {
		return nil, err
	}
	if err := latest.CheckMetadata(data); err != nil {
		return nil, err
	}
	fsys := r.sub.Options.FS
	resolved, err := restore.Resolve(fsys, latest.Metadata)
	if err != nil {
		return nil, err
	}
	if err := restore.VerifyStateFiles(fsys, resolved.Dir, resolved.Metadata); err != nil {
		return nil, err
	}
	return resolved, nil
}
