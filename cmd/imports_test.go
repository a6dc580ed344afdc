package cmd

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportRules keeps the package graph true: imports point one way,
// main → cli → cmd → engine → {savepoint, restore}, restore → savepoint;
// a job's author sees stream (the job API) and connectors, which reach the
// runtime only through stream.
// It reads the transitive dependencies with `go list -deps`, so an import
// that sneaks in through a helper package is caught too.
func TestImportRules(t *testing.T) {
	const mod = "github.com/gflink/gflink"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}|{{range .Imports}} {{.}}{{end}}`, mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type rule struct {
		pkg    string // a package path prefix the rule applies to
		banned string // a package path prefix it must not depend on
		why    string
	}
	rules := []rule{
		{mod + "/engine", mod + "/cmd", "the engine must not import cmd"},
		{mod + "/savepoint", mod + "/engine", "the snapshot format must not import the engine"},
		{mod + "/savepoint", mod + "/restore", "the snapshot format must not import restore"},
		{mod + "/restore", mod + "/engine", "restore gets a plain description of the job, not the engine"},
		{mod + "/restore", mod + "/cmd", "restore must not import cmd"},
		{mod + "/", "github.com/spf13/viper", "viper is not used (README: Flink keys are values and prefixes)"},
		{mod + "/stream", mod + "/connectors", "the job API must not depend on connectors: they build on it"},
		{mod + "/stream", mod + "/engine/jobs", "the job API must not depend on the job registry: the registry builds on it"},
		{mod + "/engine/state", mod + "/engine/checkpoint", "state backends must not reach the checkpoint coordinator"},
		{mod + "/internal/api", mod + "/stream", "the job API's types are below the job API"},
	}
	// banned lists imports a package must not make itself (its
	// dependencies may: the runtime's façade builds on its internals).
	banned := []rule{
		{mod + "/stream", mod + "/engine/internal", "the job API sees the runtime only through its façade"},
		{mod + "/connectors", mod + "/engine/internal", "connectors build on the job API, not on the runtime"},
		{mod + "/cli", mod + "/engine/internal", "a user's gflink reaches the runtime through cmd"},
		{mod + "/cmd", mod + "/engine/internal", "the command line runs jobs through engine/cluster and the engine's façade"},
		{mod + "/engine/cluster", mod + "/engine/internal", "running a job goes through the engine's façade"},
		{mod + "/cmd", mod + "/engine/state", "the command line holds no runtime logic: state belongs to the runtime"},
		{mod + "/cmd", mod + "/engine/restart", "the command line holds no runtime logic: restarts belong to the job master"},
	}
	// below lists, for a package, the only packages of this module it may
	// depend on at all: the job API's types and the network are leaves
	// under the runtime, which builds on them.
	below := map[string][]string{
		mod + "/internal/api": {mod + "/engine/state", mod + "/savepoint"},
		mod + "/engine/internal/task": {mod + "/internal/api", mod + "/engine/internal/network", mod + "/engine/state", mod + "/engine/checkpoint",
			mod + "/engine/config", mod + "/savepoint", mod + "/restore"},
		mod + "/engine/internal/jobmaster": {mod + "/engine/internal/graph", mod + "/engine/internal/task", mod + "/internal/api", mod + "/engine/internal/network",
			mod + "/engine/state", mod + "/engine/checkpoint", mod + "/engine/config", mod + "/engine/restart", mod + "/savepoint", mod + "/restore", mod + "/engine/jobregistry",
			mod + "/engine/internal/gcpace"},
		mod + "/engine/internal/graph": {mod + "/engine/internal/task", mod + "/internal/api", mod + "/engine/internal/network", mod + "/engine/state",
			mod + "/engine/checkpoint", mod + "/engine/config", mod + "/savepoint", mod + "/restore"},
		mod + "/engine/internal/network": {mod + "/engine/state", mod + "/engine/checkpoint", mod + "/savepoint", mod + "/restore", mod + "/engine/config"},
	}
	// direct lists what a package may import itself, beyond the standard
	// library and other modules: connectors use the job API, not the
	// runtime's façade behind it.
	direct := map[string][]string{
		mod + "/connectors":       {mod + "/stream", mod + "/savepoint", mod + "/engine/config", mod + "/engine/state", mod + "/connectors"},
		mod + "/connectors/kafka": {mod + "/stream", mod + "/savepoint", mod + "/engine/config", mod + "/engine/state", mod + "/connectors"},
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed %d packages; expected the whole module", len(lines))
	}
	for _, line := range lines {
		all, imports, _ := strings.Cut(line, "|")
		fields := strings.Fields(all)
		pkg, deps := fields[0], fields[1:]
		if allowed, ok := direct[pkg]; ok {
			for _, d := range strings.Fields(imports) {
				if !strings.HasPrefix(d, mod+"/") {
					continue
				}
				if !slices.ContainsFunc(allowed, func(a string) bool { return under(d, a) }) {
					t.Errorf("%s imports %s: it may import only %v of this module", pkg, d, allowed)
				}
			}
		}
		// Nothing but main and cli (a user's gflink) imports cmd itself;
		// programs reach it through cli, and no library package may depend
		// on the command line at all.
		isCmd := func(p string) bool { return under(p, mod+"/cmd") }
		for _, d := range strings.Fields(imports) {
			if isCmd(d) && pkg != mod && pkg != mod+"/cli" && !isCmd(pkg) {
				t.Errorf("%s imports %s: nothing but main and cli may import cmd", pkg, d)
			}
		}
		for _, r := range banned {
			for _, d := range strings.Fields(imports) {
				if under(pkg, r.pkg) && under(d, r.banned) {
					t.Errorf("%s imports %s: %s", pkg, d, r.why)
				}
			}
		}
		for prefix, allowed := range below {
			if !under(pkg, prefix) {
				continue
			}
			for _, d := range deps {
				if strings.HasPrefix(d, mod+"/") && !under(d, prefix) && !slices.ContainsFunc(allowed, func(a string) bool { return under(d, a) }) {
					t.Errorf("%s depends on %s: it may depend only on %v of this module", pkg, d, allowed)
				}
			}
		}
		library := false
		for _, l := range []string{"/engine", "/stream", "/connectors", "/savepoint", "/restore"} {
			library = library || under(pkg, mod+l)
		}
		for _, d := range deps {
			if library && isCmd(d) {
				t.Errorf("%s depends on %s: no library package may depend on the command line", pkg, d)
			}
			// The job master knows high availability only as the
			// engine.HighAvailability interface; ZooKeeper is engine/ha's.
			if (pkg == mod+"/engine" || under(pkg, mod+"/engine/internal")) && (under(d, mod+"/engine/ha") || under(d, "github.com/go-zookeeper/zk")) {
				t.Errorf("%s depends on %s: the engine sees high availability only through engine.HighAvailability", pkg, d)
			}
			for _, r := range rules {
				if under(pkg, r.pkg) && under(d, r.banned) {
					t.Errorf("%s depends on %s: %s", pkg, d, r.why)
				}
			}
		}
	}
}

// under reports whether pkg is prefix or below it ("a/b/" matches all of
// the module).
func under(pkg, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(pkg, prefix)
	}
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}
