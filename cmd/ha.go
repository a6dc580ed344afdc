package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/ha"
)

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
