package cmd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/ha"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/metrics"
	"github.com/gflink/gflink/engine/rest"
)

// confSections groups the honoured keys of conf/flink-conf.yaml by prefix.
var confSections = []struct{ title, prefix string }{
	{"Parallelism and job", "parallelism."},
	{"Parallelism and job", "pipeline."},
	{"State backend", "state.backend"},
	{"Checkpointing", "execution.checkpointing."},
	{"Restoring from a checkpoint or savepoint (what run -s, -n and -cm set)", "execution.state-recovery."},
	{"Restart strategies", "restart-strategy"},
	{"REST endpoint and client", "rest."},
	{"REST endpoint and client", "client."},
	{"Fault injection (gflink only; off by default)", "fault-injection."},
}

// DefaultConfigFile renders conf/flink-conf.yaml: every key gflink honours,
// commented out, with its default and what it does.
func DefaultConfigFile(opts []config.AnyOption) string {
	var b strings.Builder
	b.WriteString(`# gflink configuration, in Flink's flink-conf.yaml format: one "key: value" per line.
# gflink also reads config.yaml (nested YAML, Flink 1.19+) when there is no flink-conf.yaml.
#
# Every key gflink honours is listed below, commented out, with its default.
# Uncomment a line to change it. -D key=value on the command line overrides this file, and
# explicit flags such as -p override -D. Flink's older key names are accepted too (listed
# as "Also:"). Keys gflink does not know are ignored, as Flink does, so one file can serve a
# real Flink cluster as well.
#
# Durations: an integer and a unit -- d, h, min (or m), s, ms, µs, ns -- such as "10 s",
# "500ms", "1 min"; a bare number is milliseconds. Memory sizes: an integer and a binary
# unit -- b, k (kb), m (mb), g (gb), t (tb) -- such as "20 kb"; a bare number is bytes.
`)
	done := map[string]bool{}
	lastTitle := ""
	for _, sec := range confSections {
		for _, o := range opts {
			if done[o.Key()] || !strings.HasPrefix(o.Key(), sec.prefix) {
				continue
			}
			if sec.title != lastTitle {
				fmt.Fprintf(&b, "\n#%s\n# %s\n#%s\n", strings.Repeat("=", 78), sec.title, strings.Repeat("=", 78))
				lastTitle = sec.title
			}
			done[o.Key()] = true
			writeOption(&b, o)
		}
	}
	for _, o := range opts {
		if !done[o.Key()] {
			if lastTitle != "Other" {
				fmt.Fprintf(&b, "\n#%s\n# Other\n#%s\n", strings.Repeat("=", 78), strings.Repeat("=", 78))
				lastTitle = "Other"
			}
			writeOption(&b, o)
		}
	}
	return b.String()
}

func writeOption(b *strings.Builder, o config.AnyOption) {
	b.WriteString("\n")
	for _, l := range wrap(o.Description(), 86) {
		fmt.Fprintf(b, "# %s\n", l)
	}
	if dep := o.DeprecatedKeys(); len(dep) > 0 {
		fmt.Fprintf(b, "# Also: %s\n", strings.Join(dep, ", "))
	}
	if o.HasDefault() {
		fmt.Fprintf(b, "# %s: %s\n", o.Key(), o.DefaultString())
	} else {
		fmt.Fprintf(b, "# Default: none.\n# %s:\n", o.Key())
	}
}

// allOptions lists every option the command line validates.
func allOptions() []config.AnyOption {
	return slices.Concat(engine.Options(), rest.Options(), ha.Options(), jobregistry.Options(), metrics.Options())
}
