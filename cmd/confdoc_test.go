package cmd

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gflink/gflink/engine/config"
)

var update = flag.Bool("update", false, "rewrite conf/flink-conf.yaml")

// TestShippedConfigListsEveryKey keeps conf/flink-conf.yaml in step with
// the options gflink honours. Run with -update to regenerate it.
func TestShippedConfigListsEveryKey(t *testing.T) {
	path := filepath.Join("..", "conf", "flink-conf.yaml")
	want := DefaultConfigFile(allOptions())
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("conf/flink-conf.yaml is out of date: run go test ./cmd -run TestShippedConfigListsEveryKey -update")
	}
	for _, o := range allOptions() {
		line := "# " + o.Key() + ":"
		if o.HasDefault() {
			line += " " + o.DefaultString()
		}
		if !strings.Contains(string(got), line+"\n") {
			t.Errorf("conf/flink-conf.yaml lacks %q", line)
		}
	}
	// The shipped file, as it is, means the built-in defaults: loading it
	// sets nothing and warns about nothing.
	l, err := config.Load(config.Sources{ConfigDir: filepath.Join("..", "conf")})
	if err != nil {
		t.Fatal(err)
	}
	if keys := l.Config.Keys(); len(keys) != 0 || len(l.Warnings) != 0 {
		t.Errorf("the shipped file sets %v and warns %v", keys, l.Warnings)
	}
	// Uncommenting every line with a default gives a valid configuration
	// that equals the defaults.
	var uncommented strings.Builder
	for _, l := range strings.Split(string(got), "\n") {
		s, ok := strings.CutPrefix(l, "# ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(s, ": ")
		if ok && !strings.Contains(k, " ") && strings.Contains(k, ".") {
			uncommented.WriteString(k + ": " + v + "\n")
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "flink-conf.yaml"), []byte(uncommented.String()), 0o644)
	l2, err := config.Load(config.Sources{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := config.Validate(l2.Config, allOptions()); err != nil {
		t.Errorf("the documented defaults do not validate: %v", err)
	}
}

// Flink's own keys (cmd/testdata/flink-keys.txt: the keys of Flink's
// generated configuration docs in the namespaces gflink reads) must never be
// taken for typos of gflink's: one configuration file serves both.
func TestNoFlinkKeyIsTakenForATypo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "flink-keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	c := config.New()
	n := 0
	for _, k := range strings.Fields(string(b)) {
		c.SetString(k, "x", "-D")
		n++
	}
	if n < 100 {
		t.Fatalf("only %d Flink keys in testdata/flink-keys.txt", n)
	}
	if w := config.Misspellings(c, allOptions()); len(w) > 0 {
		t.Errorf("Flink keys taken for typos:\n%s", strings.Join(w, "\n"))
	}
	// The check itself works on this configuration.
	c.SetString("execution.checkpointing.intervall", "1s", "-D")
	if w := config.Misspellings(c, allOptions()); len(w) != 1 {
		t.Errorf("Misspellings = %q; want the one typo", w)
	}
}
