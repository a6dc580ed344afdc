package testutil

import (
	"fmt"
	"slices"
	"strings"
)

// SessionLines is a batch computation of the built-in sessionize job's
// output: for each key's timestamps, the sessions of records closer than
// gap to the one before, as "(key,start,end,count)" with end the last
// record's time plus gap. Inputs must have no two records exactly gap
// apart: there a streaming run's windows ([ts, ts+gap), half-open) do not
// merge, and this computation does.
func SessionLines(byKey map[string][]int64, gap int64) []string {
	var out []string
	for key, tss := range byKey {
		tss = slices.Sorted(slices.Values(tss))
		start, n := tss[0], 0
		for i, ts := range tss {
			if i > 0 && ts-tss[i-1] > gap {
				out = append(out, fmt.Sprintf("(%s,%d,%d,%d)", key, start, tss[i-1]+gap, n))
				start, n = ts, 0
			}
			n++
		}
		out = append(out, fmt.Sprintf("(%s,%d,%d,%d)", key, start, tss[len(tss)-1]+gap, n))
	}
	return out
}

// PrintedLines splits what the print sink wrote into lines without their
// "N> " subtask prefix (there at parallelism above 1).
func PrintedLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if i := strings.Index(l, "> "); i > 0 && strings.Trim(l[:i], "0123456789") == "" {
			l = l[i+2:]
		}
		lines = append(lines, l)
	}
	return lines
}
