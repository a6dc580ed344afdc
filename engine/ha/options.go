// Package ha is JobManager high availability with ZooKeeper, after Flink's
// ZooKeeper HA services: leader election among gflink processes (a leader
// latch of ephemeral sequential znodes), leader retrieval for the CLI, the
// job graph store, the completed-checkpoint store with its checkpoint id
// counter, and the job result store. ZooKeeper holds only small pointers;
// everything else lies in high-availability.storageDir, which every process
// of a cluster shares.
//
// Every write a leader makes on the job's behalf is a ZooKeeper multi-op
// that first checks the leader's latch znode: once its session has ended,
// nothing it does lands, whatever its goroutines still believe.
package ha

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/savepoint"
)

// Values of high-availability.zookeeper.client.acl (Flink's: creator is
// ZooKeeper's CREATOR_ALL_ACL, open its OPEN_ACL_UNSAFE).
const (
	ACLCreator = "creator"
	ACLOpen    = "open"
)

// Types of high-availability.type.
const (
	TypeNone       = "NONE"
	TypeZooKeeper  = "ZOOKEEPER"
	TypeKubernetes = "KUBERNETES"
)

// The options of high availability, with Flink's keys, deprecated keys and
// defaults.
var (
	Type = config.Enum("high-availability.type", "HighAvailabilityMode", TypeNone, TypeZooKeeper, TypeKubernetes).
		WithDeprecatedKeys("high-availability").WithDefault(TypeNone).
		WithDescription("NONE runs the job in this process only; ZOOKEEPER elects one leader among the gflink processes started with the same cluster id, and a standby takes the job over from its latest registered checkpoint when the leader's session ends. KUBERNETES is not available.")
	Quorum = config.String("high-availability.zookeeper.quorum").
		WithCheck(checkQuorum).
		WithAccepted("host:port[,host:port...]").
		WithDescription("The ZooKeeper servers, as host:port pairs separated by commas.")
	RootPath = config.String("high-availability.zookeeper.path.root").WithDefault("/flink").
			WithCheck(checkZNodePath).WithAccepted("a ZooKeeper path such as /flink").
			WithDescription("The root znode under which every cluster's znodes lie.")
	ClusterID = config.String("high-availability.cluster-id").WithDefault("/default").
			WithCheck(checkZNodePath).WithAccepted("a name such as /default or my-job").
			WithDescription("Names one cluster: its znodes, its storage and the job's id. Processes with the same cluster id contend for the same job.")
	StorageDir = config.String("high-availability.storageDir").
			WithCheck(checkStorageDir).WithAccepted("a directory path or file: URI that every process of the cluster can write").
			WithDescription("Where the job graph, the job result store and the cluster's REST token are kept; ZooKeeper holds pointers to them. Required with ZOOKEEPER.")
	SessionTimeout = config.Duration("high-availability.zookeeper.client.session-timeout").WithDefault(60 * time.Second).
			WithCheck(positiveDuration).
			WithDescription("How long ZooKeeper keeps a silent process's session, and so its leadership: a killed or paused leader is replaced this long after it stopped answering.")
	ConnectionTimeout = config.Duration("high-availability.zookeeper.client.connection-timeout").WithDefault(15 * time.Second).
				WithCheck(positiveDuration).
				WithDescription("How long to wait for a connection to the quorum before giving up.")
	RetryWait = config.Duration("high-availability.zookeeper.client.retry-wait").WithDefault(5 * time.Second).
			WithCheck(positiveDuration).
			WithDescription("The pause between retries of a ZooKeeper read or write that failed on a lost connection.")
	MaxRetryAttempts = config.Int("high-availability.zookeeper.client.max-retry-attempts").WithDefault(3).
				WithCheck(config.NonNegative).
				WithDescription("How often a ZooKeeper read or write that failed on a lost connection is retried.")
	ACL = config.Enum("high-availability.zookeeper.client.acl", "ACL", ACLCreator, ACLOpen).WithDefault(ACLCreator).
		WithDescription("Who may change the cluster's znodes. creator (the default): only the cluster's own processes, which authenticate with ZooKeeper digest credentials derived from the cluster's secret in high-availability.storageDir (or those of high-availability.zookeeper.client.digest-credentials); nobody else can read or write them. open: anyone who can reach ZooKeeper (Flink's default); the job graph and checkpoint pointers are still sealed with the cluster's secret, so a forged one is refused, but anyone can delete them.")
	DigestCredentials = config.String("high-availability.zookeeper.client.digest-credentials").
				WithCheck(checkDigest).WithAccepted("user:password").
				WithDescription("ZooKeeper digest credentials the cluster's processes and its CLI authenticate with (addauth digest user:password in zkCli), instead of those derived from the cluster's secret: for administrators who inspect the znodes. Secret: masked wherever gflink prints configuration.")
	// JobID fixes the job's id; Flink's application mode reads
	// $internal.pipeline.job-id.
	JobID = config.String("pipeline.job-id").WithDeprecatedKeys("$internal.pipeline.job-id").
		WithCheck(checkJobID).WithAccepted("32 hexadecimal digits").
		WithDescription("The job's id. Under high availability it defaults to one derived from high-availability.cluster-id, so every process of the cluster runs the same job.")
)

// Options lists the high-availability options.
func Options() []config.AnyOption {
	return []config.AnyOption{Type, Quorum, RootPath, ClusterID, StorageDir, SessionTimeout, ConnectionTimeout, RetryWait, MaxRetryAttempts, ACL, DigestCredentials, JobID}
}

func positiveDuration(d time.Duration) error {
	if d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

func checkQuorum(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("is empty")
	}
	for _, hp := range strings.Split(s, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(hp))
		if err != nil || host == "" {
			return fmt.Errorf("%q is not host:port", strings.TrimSpace(hp))
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("%q has no valid port", strings.TrimSpace(hp))
		}
	}
	return nil
}

func checkZNodePath(s string) error {
	p := "/" + strings.Trim(s, "/")
	if p == "/" {
		return errors.New("is empty")
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%q is not a valid znode path", s)
		}
	}
	return nil
}

func checkStorageDir(s string) error {
	_, err := savepoint.LocalPath(s)
	return err
}

func checkDigest(s string) error {
	user, pw, ok := strings.Cut(s, ":")
	if !ok || user == "" || pw == "" {
		return errors.New("is not user:password")
	}
	return nil
}

func checkJobID(s string) error {
	if len(s) != 32 {
		return fmt.Errorf("%q is not 32 hexadecimal digits", s)
	}
	if _, err := hex.DecodeString(s); err != nil {
		return fmt.Errorf("%q is not 32 hexadecimal digits", s)
	}
	return nil
}

// Config is high availability as configured: nil from ConfigFrom when it
// is off.
type Config struct {
	Servers           []string
	Root              string // the cluster's znode: <path.root>/<cluster-id>
	ClusterID         string // as configured, without slashes
	StorageDir        string // a local path
	SessionTimeout    time.Duration
	ConnectionTimeout time.Duration
	RetryWait         time.Duration
	MaxRetries        int
	JobID             string
	// ACL is ACLCreator or ACLOpen; Digest the explicit digest
	// credentials ("user:password"), if any.
	ACL    string
	Digest string
}

func (c *Config) clusterStorage() string { return filepath.Join(c.StorageDir, c.ClusterID) }

// CheckpointDir is where the cluster's checkpoints go when
// execution.checkpointing.dir is not set: in its private storage.
func (c *Config) CheckpointDir() string { return filepath.Join(c.clusterStorage(), "checkpoints") }

// jobResultDir is Flink's job-result-store.storage-path default.
func (c *Config) jobResultDir() string {
	return filepath.Join(c.StorageDir, "job-result-store", c.ClusterID)
}

// ConfigFrom reads high availability from the configuration: nil when
// high-availability.type is NONE, an error naming the key when a value is
// missing or unusable.
func ConfigFrom(c *config.Configuration) (*Config, error) {
	typ, err := Type.Get(c)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeNone:
		return nil, nil
	case TypeKubernetes:
		return nil, fmt.Errorf("high-availability.type: KUBERNETES is not available in gflink; use ZOOKEEPER (with high-availability.zookeeper.quorum and high-availability.storageDir) or NONE")
	}
	quorum, err := Quorum.Get(c)
	if err != nil {
		return nil, err
	}
	if quorum == "" {
		return nil, fmt.Errorf("high-availability.zookeeper.quorum is not set: high-availability.type ZOOKEEPER needs the ZooKeeper servers as host:port[,host:port...]")
	}
	storage, err := StorageDir.Get(c)
	if err != nil {
		return nil, err
	}
	if storage == "" {
		return nil, errNoStorageDir
	}
	local, err := savepoint.LocalPath(storage)
	if err != nil {
		return nil, fmt.Errorf("high-availability.storageDir: %w", err)
	}
	root, _ := RootPath.Get(c)
	cluster, _ := ClusterID.Get(c)
	cfg := &Config{StorageDir: local, ClusterID: strings.Trim(cluster, "/"),
		Root: "/" + strings.Trim(root, "/") + "/" + strings.Trim(cluster, "/")}
	for _, hp := range strings.Split(quorum, ",") {
		cfg.Servers = append(cfg.Servers, strings.TrimSpace(hp))
	}
	cfg.SessionTimeout, _ = SessionTimeout.Get(c)
	cfg.ConnectionTimeout, _ = ConnectionTimeout.Get(c)
	cfg.RetryWait, _ = RetryWait.Get(c)
	cfg.MaxRetries, _ = MaxRetryAttempts.Get(c)
	if cfg.ACL, err = ACL.Get(c); err != nil {
		return nil, err
	}
	if cfg.Digest, err = DigestCredentials.Get(c); err != nil {
		return nil, err
	}
	if err := checkSASL(c); err != nil {
		return nil, err
	}
	if cfg.JobID, err = JobID.Get(c); err != nil {
		return nil, err
	}
	if cfg.JobID == "" {
		cfg.JobID = DerivedJobID(cfg.ClusterID)
	}
	cfg.JobID = strings.ToLower(cfg.JobID)
	return cfg, nil
}

// errNoStorageDir is ConfigFrom's error for a missing storageDir: the
// cluster's processes and the CLI need it for different reasons, which
// ClientConfigFrom explains.
var errNoStorageDir = errors.New("high-availability.storageDir is not set: high availability needs a directory every process of the cluster can write (the cluster's secret, job graph, job results, and checkpoints unless execution.checkpointing.dir is set), e.g. -Dhigh-availability.storageDir=/shared/gflink/ha")

// ClientConfigFrom is ConfigFrom for the CLI (list, savepoint, stop,
// cancel, checkpoint without -m), whose need of storageDir differs from a
// cluster process's: Flink's client finds the leader with the quorum
// alone, gflink's also reads the cluster's secret there.
func ClientConfigFrom(c *config.Configuration) (*Config, error) {
	cfg, err := ConfigFrom(c)
	if errors.Is(err, errNoStorageDir) {
		return nil, errors.New("high-availability.storageDir is not set. With high availability, the CLI finds the job's leader in ZooKeeper (high-availability.zookeeper.quorum, under high-availability.zookeeper.path.root and high-availability.cluster-id) and authenticates — to ZooKeeper, whose znodes only the cluster's processes can read, and to the leader's REST endpoint — with the cluster's secret, kept in high-availability.storageDir. Give the CLI the same high-availability.storageDir, high-availability.cluster-id and high-availability.zookeeper.path.root as the cluster's processes (in flink-conf.yaml or with -D), and run it as their user.")
	}
	return cfg, err
}

// checkSASL refuses a configuration that asks for SASL (Kerberos)
// authentication with ZooKeeper, as Flink does when its JAAS login
// contexts name ZooKeeper's: gflink's client cannot do it, and quietly
// connecting unauthenticated would be worse than saying so.
func checkSASL(c *config.Configuration) error {
	if v, ok := c.Get("zookeeper.sasl.disable"); ok && strings.EqualFold(strings.TrimSpace(v.Raw), "true") {
		return nil
	}
	ctxs, ok := c.Get("security.kerberos.login.contexts")
	if !ok {
		return nil
	}
	name := "Client"
	if v, ok := c.Get("zookeeper.sasl.login-context-name"); ok {
		name = strings.TrimSpace(v.Raw)
	}
	for _, ctx := range strings.Split(ctxs.Raw, ",") {
		if strings.TrimSpace(ctx) == name {
			return fmt.Errorf("security.kerberos.login.contexts names %s, ZooKeeper's login context: SASL (Kerberos) authentication with ZooKeeper is not available in gflink. Use high-availability.zookeeper.client.acl: creator, with the credentials derived from the cluster's secret or with high-availability.zookeeper.client.digest-credentials: user:password, or set zookeeper.sasl.disable: true", name)
		}
	}
	return nil
}

// DerivedJobID is the job id of a cluster whose job id is not given: the
// same in every process started with the cluster id, so that a standby
// continues the leader's job under its id.
func DerivedJobID(clusterID string) string {
	sum := sha256.Sum256([]byte("gflink high-availability job " + strings.Trim(clusterID, "/")))
	return hex.EncodeToString(sum[:16])
}
