package cmd

import (
	"path/filepath"
	"strings"

	"github.com/gflink/gflink/engine/config"
)

// What Flink's CLI runs that gflink does not, and what gflink runs
// instead: each gets a message saying so, not "Unrecognized option" or
// "Could not find job ./x.jar".

// ownJob says how a user runs a job of their own with gflink.
const ownJob = `name a registered job (built in: wordcount), or compile your own Go job into your own gflink binary (see "Writing your own job" in the README)`

// checkRunTarget refuses Flink's deployment targets other than local:
// gflink is local execution.
func checkRunTarget(o *RunOptions) error {
	target, flag := o.Target, "-t"
	if target == "" {
		target, flag = o.Executor, "-e"
	}
	switch t := strings.ToLower(target); {
	case t == "" || t == "local":
		return nil
	case t == "remote":
		return usageErrorf(`gflink runs the job in this process: there is no remote target (%s remote). To run a Flink program on a Flink cluster, use Flink's CLI (flink run -t remote …); gflink's savepoint, stop, cancel, list and checkpoint operate such a cluster with -m <host:port>. Omit %s (or give %s local) to run the job here.`, flag, flag, flag)
	case strings.HasPrefix(t, "yarn-") || strings.HasPrefix(t, "kubernetes-"):
		return usageErrorf(`gflink does not deploy to YARN or Kubernetes (%s %s): it runs the job in this process. Start gflink run <job> where the job should run (a container, a VM, a CI runner) and omit %s, or give %s local.`, flag, target, flag, flag)
	default:
		return usageErrorf(`Unknown execution target '%s' (%s): gflink runs the job in this process, and local is its only target.`, target, flag)
	}
}

// checkRunProgram refuses a Java class, a JAR or a Python program where
// Flink runs one.
func checkRunProgram(o *RunOptions) error {
	switch {
	case o.Class != "":
		return usageErrorf("gflink runs Go jobs, not Java classes (-c %s): %s.", o.Class, ownJob)
	case len(o.Classpath) > 0:
		return usageErrorf("gflink runs Go jobs, not Java programs (-C %s): %s.", strings.Join(o.Classpath, " "), ownJob)
	case o.Python != "" || o.PyModule != "":
		return usageErrorf("gflink runs Go jobs, not Python programs (%s): %s.", strings.TrimSpace(o.Python+" "+o.PyModule), ownJob)
	}
	switch strings.ToLower(filepath.Ext(o.Job)) {
	case ".jar":
		return usageErrorf("gflink runs Go jobs, not JAR files (%s): %s.", o.Job, ownJob)
	case ".py":
		return usageErrorf("gflink runs Go jobs, not Python programs (%s): %s.", o.Job, ownJob)
	}
	return nil
}

// checkRunJobManager refuses run -m: the job runs in this process, and
// gflink cannot submit its Go jobs to a Flink cluster.
func checkRunJobManager(o *RunOptions) error {
	if o.Global.JobManager == "" {
		return nil
	}
	return usageErrorf("gflink run executes the job in this process and cannot submit it to a cluster (-m %s): its jobs are Go code, not Flink programs. Omit -m to run the job here; savepoint, stop, cancel, list and checkpoint take -m to operate a job on another gflink endpoint or a Flink cluster.", o.Global.JobManager)
}

// unsupportedActions are Flink actions gflink does not have, with what it
// has instead.
var unsupportedActions = map[string]string{
	"info":            `gflink has no info action: Flink's shows the execution plan of a JAR, and gflink's jobs are Go code. gflink run <job> --help lists a job's arguments; gflink run --check -s <snapshot> <job> shows how a snapshot's state maps onto the job's operators; gflink inspect <snapshot> shows what a snapshot holds.`,
	"run-application": `gflink has no run-application action: application mode deploys a Flink cluster for one job, and gflink is that cluster already. Use gflink run <job>.`,
}

// runOptionHint is added to a job's usage error when its arguments hold
// what looks like an option of gflink run: Flink's rule (the arguments
// after the job are the job's) is kept, and the user told where it goes.
func runOptionHint(job string, args []string) string {
	args = config.MaskArgs(args) // the hint repeats an argument
	for i, a := range args {
		opt, takesValue, ok := runOption(a)
		if !ok {
			continue
		}
		if takesValue && i+1 < len(args) {
			opt += " " + args[i+1]
		}
		return "If " + a + " is meant for gflink: gflink options go before the job name: gflink run " + opt + " " + job + " …"
	}
	return ""
}

// runOption reports whether a is an option of gflink run (its own or a
// global one, -D included), and whether it takes its value from the next
// argument.
func runOption(a string) (spelled string, takesValue bool, ok bool) {
	if strings.HasPrefix(a, "-D") {
		return a, a == "-D", true
	}
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		return "", false, false
	}
	name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
	long := map[string]bool{}
	for k, v := range longOptions["run"] {
		long[k], long[v] = true, true
	}
	for k := range globalLongOptions {
		long[k] = true
	}
	valued := map[string]bool{"p": true, "s": true, "o": true, "m": true, "t": true, "parallelism": true, "fromSavepoint": true,
		"output": true, "jobmanager": true, "target": true, "config-dir": true, "timeout": true, "token": true,
		"claimMode": true, "cm": true, "restoreMode": true, "rm": true}
	short := map[string]bool{"p": true, "s": true, "n": true, "d": true, "o": true, "m": true, "t": true}
	if long[name] && name != "help" || short[name] {
		return a, valued[name] && !hasValue, true
	}
	return "", false, false
}
