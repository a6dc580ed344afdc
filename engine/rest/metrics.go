package rest

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gflink/gflink/engine"
)

// MetricValue is Flink's Metric: an id, and its value as a string (absent
// when only the available ids are listed).
type MetricValue struct {
	ID    string  `json:"id"`
	Value *string `json:"value,omitempty"`
}

// AggregatedMetric is Flink's AggregatedMetric: one metric over several
// subtasks, with the aggregations asked for.
type AggregatedMetric struct {
	ID   string   `json:"id"`
	Min  *float64 `json:"min,omitempty"`
	Max  *float64 `json:"max,omitempty"`
	Avg  *float64 `json:"avg,omitempty"`
	Sum  *float64 `json:"sum,omitempty"`
	Skew *float64 `json:"skew,omitempty"`
}

// BackPressureInfo is Flink's JobVertexBackPressureInfo, from the
// subtasks' back-pressured time (Flink 1.13 on: no sampling).
type BackPressureInfo struct {
	Status       string                `json:"status"`
	Level        string                `json:"backpressureLevel"`
	EndTimestamp int64                 `json:"end-timestamp"`
	Subtasks     []SubtaskBackPressure `json:"subtasks"`
}

// SubtaskBackPressure is Flink's SubtaskBackPressureInfo.
type SubtaskBackPressure struct {
	Subtask       int     `json:"subtask"`
	AttemptNumber int     `json:"attempt-number"`
	Level         string  `json:"backpressureLevel"`
	Ratio         float64 `json:"ratio"`
	IdleRatio     float64 `json:"idleRatio"`
	BusyRatio     float64 `json:"busyRatio"`
}

// aggregations are Flink's, in its order.
var aggregations = []string{"min", "max", "avg", "sum", "skew"}

func (s *Server) metricRoutes() {
	s.handleJob("GET /jobs/{jobid}/metrics", func(r *http.Request) (any, int, error) {
		return selectMetrics(r, s.job.Metrics().Job), http.StatusOK, nil
	})
	s.handleVertex("GET /jobs/{jobid}/vertices/{vertexid}/metrics", func(r *http.Request, v engine.VertexMetrics) (any, int, error) {
		var all []engine.Metric
		for _, st := range v.Subtasks {
			all = append(all, subtaskMetrics(st, strconv.Itoa(st.Subtask)+".")...)
		}
		return selectMetrics(r, all), http.StatusOK, nil
	})
	s.handleVertex("GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics", s.aggregatedSubtaskMetrics)
	s.handleVertex("GET /jobs/{jobid}/vertices/{vertexid}/subtasks/{subtaskindex}/metrics", func(r *http.Request, v engine.VertexMetrics) (any, int, error) {
		raw := r.PathValue("subtaskindex")
		i, err := strconv.Atoi(raw)
		if err != nil || i < 0 {
			return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: subtaskindex %q is not a non-negative integer.", raw)
		}
		if i >= len(v.Subtasks) {
			return nil, 0, errorf(http.StatusNotFound, "Invalid subtask index %d for job vertex %s: it has %d subtasks (0 to %d).", i, v.ID, len(v.Subtasks), len(v.Subtasks)-1)
		}
		return selectMetrics(r, subtaskMetrics(v.Subtasks[i], "")), http.StatusOK, nil
	})
	s.handleVertex("GET /jobs/{jobid}/vertices/{vertexid}/watermarks", func(r *http.Request, v engine.VertexMetrics) (any, int, error) {
		out := []MetricValue{}
		for _, st := range v.Subtasks {
			if m, ok := engine.GetMetric(st.Task, "currentInputWatermark"); ok {
				val := m.String()
				out = append(out, MetricValue{ID: strconv.Itoa(st.Subtask) + ".currentInputWatermark", Value: &val})
			}
		}
		return out, http.StatusOK, nil
	})
	s.handleVertex("GET /jobs/{jobid}/vertices/{vertexid}/backpressure", func(r *http.Request, v engine.VertexMetrics) (any, int, error) {
		info := BackPressureInfo{Status: "ok", Level: "ok", EndTimestamp: time.Now().UnixMilli(), Subtasks: []SubtaskBackPressure{}}
		worst := 0.0
		for _, st := range v.Subtasks {
			ratio := func(name string) float64 {
				m, _ := engine.GetMetric(st.Task, name)
				return math.Round(m.Value) / 1000
			}
			sb := SubtaskBackPressure{Subtask: st.Subtask, AttemptNumber: st.Attempt, Ratio: ratio("backPressuredTimeMsPerSecond"),
				IdleRatio: ratio("idleTimeMsPerSecond"), BusyRatio: ratio("busyTimeMsPerSecond")}
			sb.Level = engine.BackPressureLevel(sb.Ratio)
			worst = max(worst, sb.Ratio)
			info.Subtasks = append(info.Subtasks, sb)
		}
		info.Level = engine.BackPressureLevel(worst)
		return info, http.StatusOK, nil
	})
}

// handleVertex registers a path of one of the job's vertices: a
// malformed vertex id is a bad request, an unknown one not found.
func (s *Server) handleVertex(pattern string, h func(*http.Request, engine.VertexMetrics) (any, int, error)) {
	s.handleJob(pattern, func(r *http.Request) (any, int, error) {
		id := r.PathValue("vertexid")
		if !hexID.MatchString(id) {
			return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: Cannot parse JobVertexID from %q. The expected format is [0-9a-fA-F]{32}, e.g. fd72014d4c864993a2e5a9287b4a9c5d.", id)
		}
		for _, v := range s.job.Metrics().Vertices {
			if strings.EqualFold(v.ID, id) {
				return h(r, v)
			}
		}
		return nil, 0, errorf(http.StatusNotFound, "No vertex with ID '%s' exists.", strings.ToLower(id))
	})
}

// subtaskMetrics lists a subtask's task metrics, then its operators',
// under Flink's ids: prefix (the subtask's index and a dot, at the
// vertex's level), then the operator's name and a dot for an operator's.
func subtaskMetrics(st engine.SubtaskMetrics, prefix string) []engine.Metric {
	var out []engine.Metric
	for _, m := range st.Task {
		m.Name = prefix + m.Name
		out = append(out, m)
	}
	for _, op := range st.Operators {
		for _, m := range op.Metrics {
			m.Name = prefix + MetricScopeName(op.Name) + "." + m.Name
			out = append(out, m)
		}
	}
	return out
}

// MetricScopeName is an operator's name as Flink writes it into metric
// ids (its MetricQueryService): space, '.', ':' and ',' become '_'.
func MetricScopeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '.', ':', ',':
			return '_'
		}
		return r
	}, s)
}

// selectMetrics answers a metrics request as Flink does: without ?get=,
// the ids available; with it, those of the listed ids that exist, with
// their values (unknown ids are left out, not an error).
func selectMetrics(r *http.Request, ms []engine.Metric) []MetricValue {
	out := []MetricValue{}
	get := r.URL.Query().Get("get")
	if get == "" {
		for _, m := range ms {
			out = append(out, MetricValue{ID: m.Name})
		}
		return out
	}
	for _, name := range strings.Split(get, ",") {
		name = strings.TrimSpace(name)
		for _, m := range ms {
			if m.Name == name {
				v := m.String()
				out = append(out, MetricValue{ID: name, Value: &v})
				break
			}
		}
	}
	return out
}

// aggregatedSubtaskMetrics is /subtasks/metrics: task metrics over the
// vertex's subtasks (?subtasks= selects some), aggregated as ?agg= asks
// (all of Flink's aggregations without it).
func (s *Server) aggregatedSubtaskMetrics(r *http.Request, v engine.VertexMetrics) (any, int, error) {
	q := r.URL.Query()
	aggs := aggregations
	if a := q.Get("agg"); a != "" {
		aggs = nil
		for _, x := range strings.Split(a, ",") {
			x = strings.ToLower(strings.TrimSpace(x))
			if !slices.Contains(aggregations, x) {
				return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: aggregation %q is not one of %s.", x, strings.Join(aggregations, ", "))
			}
			aggs = append(aggs, x)
		}
	}
	subtasks := v.Subtasks
	if sel := q.Get("subtasks"); sel != "" {
		picked, err := parseRanges(sel, len(v.Subtasks))
		if err != nil {
			return nil, 0, errorf(http.StatusBadRequest, "Bad request, could not parse parameters: subtasks %q: %v. Give a comma-separated list of indexes and ranges, e.g. 0,2-3.", sel, err)
		}
		subtasks = nil
		for _, i := range picked {
			subtasks = append(subtasks, v.Subtasks[i])
		}
	}
	get := q.Get("get")
	if get == "" {
		out := []MetricValue{}
		if len(subtasks) > 0 {
			for _, m := range subtasks[0].Task {
				if !m.IsText {
					out = append(out, MetricValue{ID: m.Name})
				}
			}
		}
		return out, http.StatusOK, nil
	}
	out := []AggregatedMetric{}
	for _, name := range strings.Split(get, ",") {
		name = strings.TrimSpace(name)
		var xs []float64
		for _, st := range subtasks {
			if m, ok := engine.GetMetric(st.Task, name); ok && !m.IsText {
				xs = append(xs, m.Value)
			}
		}
		if len(xs) == 0 {
			continue
		}
		out = append(out, aggregate(name, xs, aggs))
	}
	return out, http.StatusOK, nil
}

func aggregate(name string, xs []float64, aggs []string) AggregatedMetric {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	avg := sum / float64(len(xs))
	skew := 0.0
	if avg != 0 {
		dev := 0.0
		for _, x := range xs {
			dev += math.Abs(avg - x)
		}
		skew = min(dev/float64(len(xs))/avg*100, 100) // Flink's DoubleDataSkew
	}
	vals := map[string]float64{"min": slices.Min(xs), "max": slices.Max(xs), "avg": avg, "sum": sum, "skew": skew}
	am := AggregatedMetric{ID: name}
	for _, a := range aggs {
		v := vals[a]
		switch a {
		case "min":
			am.Min = &v
		case "max":
			am.Max = &v
		case "avg":
			am.Avg = &v
		case "sum":
			am.Sum = &v
		case "skew":
			am.Skew = &v
		}
	}
	return am
}

// parseRanges reads Flink's subtask selection ("1,3,5-9") over n
// subtasks.
func parseRanges(s string, n int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not an index", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a range", part)
			}
		}
		for i := a; i <= b && i < n; i++ {
			if !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
