// Package rest is gflink's control plane: a server for Flink's REST API
// (the subset the CLI and dashboards use) over one in-process job, and the
// client the CLI drives it with — which works against a real Flink cluster
// too. The registry that lets `gflink savepoint <jobId>` find the process
// running a job is engine/jobregistry.
//
// Unlike Flink's, a gflink endpoint runs as its user on a shared machine,
// so every request must carry the job's secret token (Authorization:
// Bearer <token>) unless rest.authentication.enabled is false; bodies,
// connections and slow clients are bounded.
package rest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine/config"
)

// PortSpec is a list of ports and port ranges, as Flink's rest.bind-port
// takes them: "8081", "8081-8181", "50100,50200-50210". Port 0 means any
// free port.
type PortSpec [][2]int

// ParsePorts reads a PortSpec.
func ParsePorts(s string) (PortSpec, error) {
	var out PortSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 || a > 65535 {
			return nil, fmt.Errorf("%q is not a port", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a || b > 65535 {
				return nil, fmt.Errorf("%q is not a port range", part)
			}
		}
		out = append(out, [2]int{a, b})
	}
	return out, nil
}

func (p PortSpec) String() string {
	parts := make([]string, len(p))
	for i, r := range p {
		if r[0] == r[1] {
			parts[i] = strconv.Itoa(r[0])
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r[0], r[1])
		}
	}
	return strings.Join(parts, ",")
}

// Options of the REST endpoint and client.
var (
	BindAddress = config.String("rest.bind-address").WithDefault("127.0.0.1").
			WithDescription("The address the REST endpoint of a running job listens on.")
	BindPort = config.NewOption("rest.bind-port", ParsePorts, PortSpec.String,
		"a port, a list and/or range of ports such as 8081,8090-8100 (the first free one is used), or 0 for any free port").
		WithDefault(PortSpec{{8081, 8181}}).
		WithDescription("The port(s) the REST endpoint of a running job listens on; the first free one wins.")
	ClientTimeout = config.Duration("client.timeout").WithDefault(time.Minute).
			WithDeprecatedKeys("akka.client.timeout").
			WithDescription("How long savepoint, stop, cancel, checkpoint and dispose wait for an answer (--timeout overrides it).")
	AsyncStoreDuration = config.Duration("rest.async.store-duration").WithDefault(5 * time.Minute).
				WithDescription("How long the result of an asynchronous operation (savepoint, stop, checkpoint, disposal) can be fetched.")
	AuthenticationEnabled = config.Bool("rest.authentication.enabled").WithDefault(true).
				WithDescription("gflink only: every request to a job's REST endpoint must carry the job's secret token (Authorization: Bearer <token>; gflink's commands send it). The token is in the job's entry under $GFLINK_HOME/jobs, readable by its user only. false lets every local user who can reach the port cancel or stop the job and write savepoints as its user: only for tools that cannot send a token; the job logs a warning when it starts.")
	MaxContentLength = config.Memory("rest.server.max-content-length").WithDefault(config.MemorySize(1 << 20)).
				WithDescription("The largest request body the REST endpoint accepts; a larger one is refused with 413. (Flink's default is 100 mb; gflink's requests are a few hundred bytes.)")
	ServerReadTimeout = config.Duration("rest.server.read-timeout").WithDefault(10 * time.Second).
				WithCheck(positive).
				WithDescription("gflink only: how long the REST endpoint waits for a whole request, headers and body; a slower client is disconnected.")
	ServerWriteTimeout = config.Duration("rest.server.write-timeout").WithDefault(30 * time.Second).
				WithCheck(positive).
				WithDescription("gflink only: how long the REST endpoint takes at most to answer a request, from the end of its headers.")
	ServerIdleTimeout = config.Duration("rest.server.idle-timeout").WithDefault(time.Minute).
				WithCheck(positive).
				WithDescription("gflink only: how long the REST endpoint keeps an idle keep-alive connection open.")
	MaxConnections = config.Int("rest.server.max-connections").WithDefault(32).
			WithCheck(func(n int) error {
			if n < 1 {
				return fmt.Errorf("%d is not a positive number of connections", n)
			}
			return nil
		}).
		WithDescription("gflink only: how many connections the REST endpoint keeps open for clients that have not yet sent an authenticated request; when another one connects, the oldest of them is closed. Connections that authenticated are not counted, so slow or idle clients can neither exhaust the job process's file descriptors nor lock the job's user out. A client has 2 s (or rest.server.read-timeout, if shorter) to send a request's headers.")
)

// positive refuses 0, which would mean "no timeout" to net/http.
func positive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("the timeout must be positive")
	}
	return nil
}

// Options lists the REST options.
func Options() []config.AnyOption {
	return []config.AnyOption{BindAddress, BindPort, ClientTimeout, AsyncStoreDuration, AuthenticationEnabled,
		MaxContentLength, ServerReadTimeout, ServerWriteTimeout, ServerIdleTimeout, MaxConnections}
}
