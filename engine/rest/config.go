package rest

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/gflink/gflink/engine/config"
	"github.com/gflink/gflink/engine/restart"
)

// ConfigurationInfoEntry is one key of GET /jobmanager/config.
type ConfigurationInfoEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// configEntries is the job's configuration, as Flink serves its cluster's:
// every key set, with the values of sensitive keys masked
// (config.IsSensitive, Flink's GlobalConfiguration.isSensitive).
func (s *Server) configEntries() []ConfigurationInfoEntry {
	out := []ConfigurationInfoEntry{}
	for _, kv := range s.conf.MaskedEntries() {
		out = append(out, ConfigurationInfoEntry{Key: kv[0], Value: kv[1]})
	}
	return out
}

// JobConfigInfo is GET /jobs/:jobid/config, with the field names Flink
// writes (its serializer's, not the generated description's).
type JobConfigInfo struct {
	JobID           string              `json:"jid"`
	Name            string              `json:"name"`
	ExecutionConfig ExecutionConfigInfo `json:"execution-config"`
}

// ExecutionConfigInfo is a job's execution config; UserConfig holds its
// arguments as Flink's ParameterTool reads them (secrets masked).
type ExecutionConfigInfo struct {
	ExecutionMode   string            `json:"execution-mode"`
	RestartStrategy string            `json:"restart-strategy"`
	JobParallelism  int               `json:"job-parallelism"`
	ObjectReuse     bool              `json:"object-reuse-mode"`
	UserConfig      map[string]string `json:"user-config"`
}

func (s *Server) jobConfig() JobConfigInfo {
	info := s.job.Info()
	strategy := "Cluster level default restart strategy"
	if st, err := restart.FromConfig(s.conf, info.CheckpointConfig.Enabled(), rand.New(rand.NewPCG(0, 0))); err == nil {
		strategy = st.String()
	}
	p := 0
	for _, v := range info.Vertices {
		p = max(p, v.Parallelism)
	}
	return JobConfigInfo{JobID: info.ID, Name: info.Name, ExecutionConfig: ExecutionConfigInfo{
		ExecutionMode: "PIPELINED", RestartStrategy: strategy, JobParallelism: p, UserConfig: userConfig(s.args)}}
}

// noValueKey is what Flink's ParameterTool records for an option given
// without a value.
const noValueKey = "__NO_VALUE_KEY"

// userConfig reads (masked) job arguments as ParameterTool.fromArgs does:
// "--key value", "--key=value", "-key value", a flag without value; a
// word that follows no option is kept under "arg<n>".
func userConfig(args []string) map[string]string {
	out := map[string]string{}
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			out["arg"+strconv.Itoa(positional)] = a
			positional++
			continue
		}
		key, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				value = args[i+1]
				i++
			} else {
				value = noValueKey
			}
		}
		out[key] = config.Masked(key, value)
	}
	return out
}
