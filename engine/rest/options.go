// Package rest is gflink's control plane: a server for Flink's REST API
// (the subset the CLI and dashboards use) over one in-process job, the
// client the CLI drives it with — which works against a real Flink cluster
// too — and the registry under $GFLINK_HOME/jobs that lets `gflink
// savepoint <jobId>` find the process running a job.
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

func parsePorts(s string) (PortSpec, error) {
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
	BindPort = config.NewOption("rest.bind-port", parsePorts, PortSpec.String,
		"a port, a list and/or range of ports such as 8081,8090-8100 (the first free one is used), or 0 for any free port").
		WithDefault(PortSpec{{8081, 8181}}).
		WithDescription("The port(s) the REST endpoint of a running job listens on; the first free one wins.")
	ClientTimeout = config.Duration("client.timeout").WithDefault(time.Minute).
			WithDeprecatedKeys("akka.client.timeout").
			WithDescription("How long savepoint, stop, cancel, checkpoint and dispose wait for an answer (--timeout overrides it).")
	AsyncStoreDuration = config.Duration("rest.async.store-duration").WithDefault(5 * time.Minute).
				WithDescription("How long the result of an asynchronous operation (savepoint, stop, checkpoint, disposal) can be fetched.")
)

// Options lists the REST options.
func Options() []config.AnyOption {
	return []config.AnyOption{BindAddress, BindPort, ClientTimeout, AsyncStoreDuration}
}
