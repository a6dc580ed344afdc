package cmd

import "strings"

// longOptions lists, per action, Flink's long option names (and the
// multi-letter short ones such as -cm) that commons-cli accepts with a
// single dash. pflag does not, so argv is normalised before cobra sees it:
// "-fromSavepoint x" becomes "--fromSavepoint x", "-cm claim" becomes
// "--claimMode claim". Unambiguous prefixes of long options are expanded
// too ("--fromSav" is "--fromSavepoint"), as commons-cli does.
var longOptions = map[string]map[string]string{
	"run": {
		"parallelism": "parallelism", "fromSavepoint": "fromSavepoint", "allowNonRestoredState": "allowNonRestoredState",
		"claimMode": "claimMode", "cm": "claimMode", "restoreMode": "restoreMode", "rm": "restoreMode",
		"detached": "detached", "shutdownOnAttachedExit": "shutdownOnAttachedExit", "sae": "shutdownOnAttachedExit",
		"check": "check", "target": "target", "executor": "executor", "class": "class", "classpath": "classpath",
		"python": "python", "py": "python", "pyModule": "pyModule", "pym": "pyModule",
	},
	"list":        {"running": "running", "scheduled": "scheduled", "all": "all"},
	"savepoint":   {"dispose": "dispose", "type": "type", "detached": "detached", "jarfile": "jarfile"},
	"stop":        {"savepointPath": "savepointPath", "drain": "drain", "type": "type", "detached": "detached"},
	"cancel":      {"withSavepoint": "withSavepoint", "type": "type"},
	"checkpoint":  {"full": "full"},
	"checkpoints": {"latest": "latest"},
	"inspect":     {},
}

// shortOnly lists options that Flink defines with a multi-letter short
// name and no long name: "-detached" works, "--detached" (or a prefix
// such as "--det") is an unrecognized option, as in commons-cli. Scripts
// written against gflink then run against Flink too.
var shortOnly = map[string][]string{"savepoint": {"detached"}, "stop": {"detached"}}

// checkShortOnly refuses the long spelling of a short-only option.
func checkShortOnly(args []string) error {
	if len(args) == 0 {
		return nil
	}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a[2:], "=")
		for _, opt := range shortOnly[args[0]] {
			if name != "" && strings.HasPrefix(opt, name) {
				return usageErrorf("Unrecognized option: %s", a)
			}
		}
	}
	return nil
}

// asksForJSON reports whether argv asks for -o json, for errors found
// before the flags are parsed.
func asksForJSON(args []string) bool {
	for i, a := range args {
		switch a {
		case "-ojson", "-o=json", "--output=json":
			return true
		case "-o", "--output", "-output":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		}
	}
	return false
}

// globalLongOptions are accepted by every action (Flink's custom command
// line, plus gflink's own).
var globalLongOptions = map[string]string{
	"jobmanager": "jobmanager", "config-dir": "config-dir", "output": "output", "timeout": "timeout",
	"token": "token", "help": "help",
}

// normalizeArgs rewrites argv (without the program name) for cobra. For
// run, everything after the job name belongs to the job and is left alone.
func normalizeArgs(args []string) []string {
	if len(args) == 0 {
		return args
	}
	action := args[0]
	opts := longOptions[action]
	out := []string{action}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if action == "run" && !strings.HasPrefix(a, "-") {
			// The job name: the rest is the job's.
			out = append(out, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		if strings.HasPrefix(a, "-D") {
			out = append(out, a)
			if a == "-D" && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		dashes := len(a) - len(strings.TrimLeft(a, "-"))
		if long, ok := resolveLong(name, dashes, opts); ok {
			name = long
			a = "--" + long
			if hasValue {
				a += "=" + value
			}
		}
		if long, ok := optionalArgOptions[action][name]; ok && !hasValue {
			// An option with an optional argument (stop -p, cancel -s):
			// commons-cli consumes the next token unless it is an option
			// (Flink then treats a lone value as the job id when no job id
			// follows). pflag needs the --name=value form for that.
			a = "--" + long + "="
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				a += args[i]
			}
			out = append(out, a)
			continue
		}
		out = append(out, a)
		// Copy an option's value as it is, even if it starts with a dash.
		if !hasValue && (valueOptions[action][name] || globalValueOptions[name]) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

func resolveLong(name string, dashes int, opts map[string]string) (string, bool) {
	if long, ok := opts[name]; ok && (dashes == 2 || len(name) > 1) {
		return long, true
	}
	if long, ok := globalLongOptions[name]; ok && (dashes == 2 || len(name) > 1) {
		return long, true
	}
	if dashes != 2 || name == "" {
		return "", false
	}
	// An unambiguous prefix of a long option.
	var match string
	for _, set := range []map[string]string{opts, globalLongOptions} {
		for k, long := range set {
			if len(k) > 2 && strings.HasPrefix(k, name) {
				if match != "" && match != long {
					return "", false
				}
				match = long
			}
		}
	}
	return match, match != ""
}

// valueOptions lists, per action, the options (short names and long names)
// that take a value.
var valueOptions = map[string]map[string]bool{
	"run": {"p": true, "parallelism": true, "s": true, "fromSavepoint": true, "claimMode": true,
		"restoreMode": true, "c": true, "C": true},
	"savepoint": {"d": true, "dispose": true, "type": true, "j": true, "jarfile": true},
	"stop":      {"type": true},
	"cancel":    {"type": true},
}

// optionalArgOptions lists, per action, the options whose argument is
// optional, by short and long name, with their long name.
var optionalArgOptions = map[string]map[string]string{
	"stop":   {"p": "savepointPath", "savepointPath": "savepointPath"},
	"cancel": {"s": "withSavepoint", "withSavepoint": "withSavepoint"},
}

// globalValueOptions take a value in every action.
var globalValueOptions = map[string]bool{
	"m": true, "jobmanager": true, "config-dir": true, "o": true, "output": true, "timeout": true,
	"token": true, "t": true, "target": true, "z": true,
}
