// Package metrics reports a job's metrics to monitoring systems, as
// Flink's metric reporters do: the Prometheus reporter serves them at
// /metrics in Prometheus' exposition format, under Flink's names and
// labels, so that dashboards and alerts written for Flink work unchanged.
package metrics

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/rest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// PrometheusFactory is the factory class that selects Flink's Prometheus
// reporter; PrometheusClass is the reporter class older configurations
// name with metrics.reporter.<name>.class.
const (
	PrometheusFactory = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
	PrometheusClass   = "org.apache.flink.metrics.prometheus.PrometheusReporter"
	defaultPort       = "9249"
)

// Reporters lists the reporters to start (Flink's metrics.reporters: a
// comma-separated list of names; every configured reporter without it).
var Reporters = config.String("metrics.reporters").
	WithDescription("The names of the metric reporters to start, comma-separated (every reporter configured with metrics.reporter.<name>.factory.class when unset). gflink serves Prometheus reporters (" + PrometheusFactory + ").")

// Options are the metric reporter options gflink knows by key; a
// reporter's own keys (metrics.reporter.<name>.…) are read by prefix.
func Options() []config.AnyOption { return []config.AnyOption{Reporters} }

// ReporterConfig is one configured Prometheus reporter.
type ReporterConfig struct {
	Name  string
	Ports rest.PortSpec
	// FilterLabelValues replaces characters other than [a-zA-Z0-9:_] in
	// label values with '_' (Flink's filterLabelValueCharacters, true by
	// default).
	FilterLabelValues bool
}

// Configured reads the Prometheus reporters from c. Reporters of other
// kinds (JMX, Slf4j, …) are not served: they come back as warnings, so
// that a Flink cluster's configuration runs here unchanged.
func Configured(c *config.Configuration) (reps []ReporterConfig, warnings []string, err error) {
	names := map[string]bool{}
	for _, k := range c.Keys() {
		if rest, ok := strings.CutPrefix(k, "metrics.reporter."); ok {
			if name, _, ok := strings.Cut(rest, "."); ok && name != "" {
				names[name] = true
			}
		}
	}
	list := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	if v, ok := c.Get(Reporters.Key()); ok && strings.TrimSpace(v.Raw) != "" {
		list = nil
		for _, n := range strings.Split(v.Raw, ",") {
			if n = strings.TrimSpace(n); n != "" {
				list = append(list, n)
			}
		}
	}
	for _, name := range list {
		key := func(s string) string { return "metrics.reporter." + name + "." + s }
		factory, hasFactory := c.Get(key("factory.class"))
		class, hasClass := c.Get(key("class"))
		switch {
		case hasFactory && strings.TrimSpace(factory.Raw) == PrometheusFactory, !hasFactory && hasClass && strings.TrimSpace(class.Raw) == PrometheusClass:
		case hasFactory:
			warnings = append(warnings, fmt.Sprintf("Metric reporter '%s' (%s) is not one gflink serves, so it is not started: gflink serves the Prometheus reporter (%s: %s).", name, strings.TrimSpace(factory.Raw), key("factory.class"), PrometheusFactory))
			continue
		case hasClass:
			warnings = append(warnings, fmt.Sprintf("Metric reporter '%s' (%s) is not one gflink serves, so it is not started: gflink serves the Prometheus reporter (%s: %s).", name, strings.TrimSpace(class.Raw), key("factory.class"), PrometheusFactory))
			continue
		default:
			return nil, warnings, fmt.Errorf("metric reporter '%s' is listed in metrics.reporters but has no %s: set it to %s", name, key("factory.class"), PrometheusFactory)
		}
		r := ReporterConfig{Name: name, FilterLabelValues: true}
		port := defaultPort
		if v, ok := c.Get(key("port")); ok {
			port = strings.TrimSpace(v.Raw)
		}
		if r.Ports, err = rest.ParsePorts(port); err != nil {
			return nil, warnings, fmt.Errorf("invalid value %q for %s: %v; expected a port or a range of ports such as 9250-9260", port, key("port"), err)
		}
		if v, ok := c.Get(key("filterLabelValueCharacters")); ok {
			b, perr := strconv.ParseBool(strings.TrimSpace(v.Raw))
			if perr != nil {
				return nil, warnings, fmt.Errorf("invalid value %q for %s: expected true or false", v.Raw, key("filterLabelValueCharacters"))
			}
			r.FilterLabelValues = b
		}
		reps = append(reps, r)
	}
	return reps, warnings, nil
}

// Reporter is a running Prometheus reporter: an HTTP server answering
// /metrics with the job's metrics at the time of the scrape.
type Reporter struct {
	srv *http.Server
	l   net.Listener
	err chan error
}

// Start binds the reporter's first free port on address and serves the
// job's metrics there until Close.
func Start(job *engine.Job, rc ReporterConfig, address string, log *slog.Logger) (*Reporter, error) {
	l, err := rest.Listen(address, rc.Ports)
	if err != nil {
		return nil, fmt.Errorf("metric reporter '%s': %w", rc.Name, errors.Unwrap(err))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{job: job, filter: rc.FilterLabelValues, host: hostname(), tmID: tmID()})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.Handle("/", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	r := &Reporter{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, l: l, err: make(chan error, 1)}
	go func() { r.err <- r.srv.Serve(l) }()
	if log != nil {
		log.Info(fmt.Sprintf("Started PrometheusReporter HTTP server on port %d.", l.Addr().(*net.TCPAddr).Port))
	}
	return r, nil
}

// Addr is the address the reporter serves on.
func (r *Reporter) Addr() string { return r.l.Addr().String() }

// Close stops the reporter and waits for its server to end.
func (r *Reporter) Close() error {
	err := r.srv.Close()
	<-r.err
	return err
}

// collector turns a reading of the job's metrics into Prometheus
// gauges, as Flink's reporter does: every counter and numeric gauge is a
// gauge named flink_<scope>_<metric>, its scope's variables are labels,
// text gauges are left out.
type collector struct {
	job        *engine.Job
	filter     bool
	host, tmID string
	// descs caches each metric's description by name: making one
	// validates and hashes its name and labels, most of a scrape's cost.
	mu    sync.Mutex
	descs map[string]*prometheus.Desc
}

func (c *collector) desc(name, help string, labels []string) *prometheus.Desc {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.descs[name]; ok {
		return d
	}
	if c.descs == nil {
		c.descs = map[string]*prometheus.Desc{}
	}
	d := prometheus.NewDesc(name, help, labels, nil)
	c.descs[name] = d
	return d
}

// Describe sends nothing: the metrics follow the job's graph, so the
// collector is unchecked.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

// sanitize replaces the characters Prometheus does not allow in a
// metric name, [^a-zA-Z0-9:_], with '_', as Flink's reporter does.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ':' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func (c *collector) label(s string) string {
	if c.filter {
		return sanitize(s)
	}
	return s
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.job.Metrics()
	emit := func(scope string, ms []engine.Metric, names []string, values []string) {
		for _, x := range ms {
			if x.IsText {
				continue
			}
			d := c.desc("flink_"+scope+"_"+sanitize(x.Name), x.Name+" (scope: "+scope+")", names)
			if pm, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, x.Value, values...); err == nil {
				ch <- pm
			}
		}
	}
	jobLabels := []string{"host", "job_id", "job_name"}
	emit("jobmanager_job", m.Job, jobLabels, []string{c.label(c.host), m.JobID, c.label(m.JobName)})
	taskLabels := []string{"host", "tm_id", "job_id", "job_name", "task_id", "task_attempt_id", "task_name", "subtask_index", "task_attempt_num"}
	for _, v := range m.Vertices {
		for _, st := range v.Subtasks {
			values := []string{c.label(c.host), c.label(c.tmID), m.JobID, c.label(m.JobName), v.ID,
				attemptID(m.JobID, v.ID, st.Subtask, st.Attempt), c.label(v.Name), strconv.Itoa(st.Subtask), strconv.Itoa(st.Attempt)}
			emit("taskmanager_job_task", st.Task, taskLabels, values)
			for _, op := range st.Operators {
				emit("taskmanager_job_task_operator", op.Metrics, append(slices.Clone(taskLabels), "operator_id", "operator_name"),
					append(slices.Clone(values), op.ID, c.label(op.Name)))
			}
		}
	}
}

// attemptID is a subtask attempt's id (Flink's ExecutionAttemptID, 32
// hex digits): stable for the attempt, different for the next.
func attemptID(job, vertex string, subtask, attempt int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d/%d", job, vertex, subtask, attempt)))
	return hex.EncodeToString(h[:16])
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

// tmID names this process as Flink names a task manager.
func tmID() string { return fmt.Sprintf("%s:%d", hostname(), os.Getpid()) }
