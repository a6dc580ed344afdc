package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	ok := []struct {
		in   string
		want time.Duration
	}{
		{"10000", 10 * time.Second},
		{"0", 0},
		{"10s", 10 * time.Second},
		{"10 s", 10 * time.Second},
		{" 10 S ", 10 * time.Second},
		{"1 min", time.Minute},
		{"1m", time.Minute},
		{"3 minutes", 3 * time.Minute},
		{"500ms", 500 * time.Millisecond},
		{"2h", 2 * time.Hour},
		{"1d", 24 * time.Hour},
		{"2 days", 48 * time.Hour},
		{"7µs", 7 * time.Microsecond},
		{"3 micros", 3 * time.Microsecond},
		{"9ns", 9},
		{"5 secs", 5 * time.Second},
		{"1 milli", time.Millisecond},
	}
	for _, c := range ok {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, wantErr string }{
		{"", "argument is an empty- or whitespace-only string"},
		{"   ", "argument is an empty- or whitespace-only string"},
		{"abc", "text does not start with a number"},
		{"-5s", "text does not start with a number"},
		{"1.5s", "Time interval unit label '.5s' does not match any of the recognized units: DAYS: (d | day | days), HOURS: (h | hour | hours), MINUTES: (min | m | minute | minutes), SECONDS: (s | sec | secs | second | seconds), MILLISECONDS: (ms | milli | millis | millisecond | milliseconds), MICROSECONDS: (µs | micro | micros | microsecond | microseconds), NANOSECONDS: (ns | nano | nanos | nanosecond | nanoseconds)"},
		{"10us", "Time interval unit label 'us' does not match"},
		{"99999999999999999999999", "The value '99999999999999999999999' cannot be represented as Duration (numeric overflow)."},
		{"200000000 d", "cannot be represented as Duration (numeric overflow)"},
	}
	for _, c := range bad {
		_, err := ParseDuration(c.in)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("ParseDuration(%q) error = %v; want %q", c.in, err, c.wantErr)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 ms", 10 * time.Minute: "10 min", time.Second: "1 s", time.Hour: "1 h",
		24 * time.Hour: "1 d", 1500 * time.Millisecond: "1500 ms", 90 * time.Second: "90 s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q; want %q", d, got, want)
		}
	}
}

func TestParseMemorySize(t *testing.T) {
	ok := map[string]MemorySize{
		"100": 100, "20 kb": 20 << 10, "20k": 20 << 10, "1m": 1 << 20, "32 MB": 32 << 20,
		"1g": 1 << 30, "2 tebibytes": 2 << 40, "7 bytes": 7, "5b": 5,
	}
	for in, want := range ok {
		got, err := ParseMemorySize(in)
		if err != nil || got != want {
			t.Errorf("ParseMemorySize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"x":                      "text does not start with a number",
		"5 pb":                   "Memory size unit 'pb' does not match any of the recognized units: (b | bytes) / (k | kb | kibibytes) / (m | mb | mebibytes) / (g | gb | gibibytes) / (t | tb | tebibytes)",
		"99999999999999999999 t": "The value '99999999999999999999 t' cannot be re represented as 64bit number of bytes (numeric overflow).",
	} {
		_, err := ParseMemorySize(in)
		if err == nil || err.Error() != wantErr {
			t.Errorf("ParseMemorySize(%q) error = %v; want %q", in, err, wantErr)
		}
	}
	for m, want := range map[MemorySize]string{20 << 10: "20 kb", 32 << 20: "32 mb", 1 << 30: "1 gb", 1000: "1000 bytes"} {
		if got := m.String(); got != want {
			t.Errorf("%d.String() = %q; want %q", int64(m), got, want)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	testInterval = Duration("execution.checkpointing.interval")
	testRetained = Int("execution.checkpointing.num-retained").WithDefault(1).
			WithDeprecatedKeys("state.checkpoints.num-retained")
	testMode = Enum("execution.checkpointing.mode", "CheckpointingMode", "EXACTLY_ONCE", "AT_LEAST_ONCE").
			WithDefault("EXACTLY_ONCE")
)

func TestLoadFlatFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, LegacyFileName, strings.Join([]string{
		"# a comment",
		"execution.checkpointing.interval: 10 s # trailing comment",
		"not a pair",
		"state.checkpoints.num-retained: 3",
		"execution.checkpointing.mode: at_least_once",
		"execution.checkpointing.mode: exactly_once",
		"",
	}, "\n"))
	l, err := Load(Sources{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if l.File != path {
		t.Errorf("File = %q; want %q", l.File, path)
	}
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], LegacyFileName+":3") {
		t.Errorf("Warnings = %q; want one naming line 3", l.Warnings)
	}
	if d, _ := testInterval.Get(l.Config); d != 10*time.Second {
		t.Errorf("interval = %v", d)
	}
	if n, _ := testRetained.Get(l.Config); n != 3 {
		t.Errorf("num-retained via deprecated key = %d; want 3", n)
	}
	if m, _ := testMode.Get(l.Config); m != "EXACTLY_ONCE" {
		t.Errorf("duplicate key must take the last value, got %q", m)
	}
	if w := DeprecationWarnings(l.Config, []AnyOption{testRetained}); len(w) != 1 {
		t.Errorf("deprecation warnings = %q", w)
	}
}

func TestLoadNestedYAML(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, FileName, `
execution:
  checkpointing:
    interval: 1 min
    mode: AT_LEAST_ONCE
state.checkpoints.num-retained: 2
pipeline:
  name: ~
`)
	l, err := Load(Sources{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := testInterval.Get(l.Config); d != time.Minute {
		t.Errorf("interval = %v", d)
	}
	if m, _ := testMode.Get(l.Config); m != "AT_LEAST_ONCE" {
		t.Errorf("mode = %q", m)
	}
	if _, ok := l.Config.Get("pipeline.name"); ok {
		t.Error("a null value must leave the key unset")
	}
	v, _ := l.Config.Get("execution.checkpointing.interval")
	if v.Origin.Line != 4 {
		t.Errorf("origin line = %d; want 4", v.Origin.Line)
	}
}

func TestLoadYAMLDuplicateIsError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, FileName, "a.b: 1\na:\n  b: 2\n")
	_, err := Load(Sources{ConfigDir: dir})
	if err == nil || !strings.Contains(err.Error(), "key 'a.b' is already defined at line 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestLegacyFileWinsOverYAML(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, FileName, "execution.checkpointing.interval: 1 min\n")
	writeFile(t, dir, LegacyFileName, "execution.checkpointing.interval: 2 min\n")
	l, err := Load(Sources{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := testInterval.Get(l.Config); d != 2*time.Minute {
		t.Errorf("interval = %v; flink-conf.yaml must win", d)
	}
	// The user is told which file is used and which ignored.
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "using "+filepath.Join(dir, LegacyFileName)) ||
		!strings.Contains(l.Warnings[0], "ignoring "+filepath.Join(dir, FileName)) {
		t.Errorf("Warnings = %q; want one naming the file used and the one ignored", l.Warnings)
	}
	// With config.yaml alone, nothing to say.
	os.Remove(filepath.Join(dir, LegacyFileName))
	if l, err := Load(Sources{ConfigDir: dir}); err != nil || len(l.Warnings) != 0 {
		t.Errorf("config.yaml alone: %v, warnings %q", err, l.Warnings)
	}
}

func TestDirectoryDiscovery(t *testing.T) {
	root := t.TempDir()
	work, exe, envDir, flinkDir := filepath.Join(root, "work"), filepath.Join(root, "bin"), filepath.Join(root, "env"), filepath.Join(root, "flink")
	writeFile(t, filepath.Join(work, "conf"), LegacyFileName, "pipeline.name: work\n")
	writeFile(t, filepath.Join(exe, "conf"), LegacyFileName, "pipeline.name: exe\n")
	writeFile(t, envDir, LegacyFileName, "pipeline.name: env\n")
	writeFile(t, flinkDir, FileName, "pipeline.name: flink\n")
	name := String("pipeline.name")
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	check := func(src Sources, want string) {
		t.Helper()
		l, err := Load(src)
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := name.Lookup(l.Config)
		if got != want {
			t.Errorf("pipeline.name = %q; want %q", got, want)
		}
	}
	src := Sources{Getenv: getenv, WorkingDir: work, ExecutableDir: exe}
	check(src, "work")
	src.WorkingDir = root // no conf/ here
	check(src, "exe")
	env["FLINK_CONF_DIR"] = flinkDir
	check(src, "flink")
	env["GFLINK_CONF_DIR"] = envDir
	check(src, "env")
	src.ConfigDir = filepath.Join(work, "conf")
	check(src, "work")
	check(Sources{WorkingDir: root}, "") // nothing anywhere: defaults

	env["GFLINK_CONF_DIR"] = filepath.Join(root, "missing")
	_, err := Load(Sources{Getenv: getenv})
	want := "The configuration directory '" + filepath.Join(root, "missing") + "', specified in the 'GFLINK_CONF_DIR' environment variable, does not exist."
	if err == nil || err.Error() != want {
		t.Errorf("err = %v; want %q", err, want)
	}
	_, err = Load(Sources{ConfigDir: root})
	if err == nil || !strings.Contains(err.Error(), "contains neither flink-conf.yaml nor config.yaml") {
		t.Errorf("err = %v", err)
	}
}

func TestPrecedenceAndErrorOrigin(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, LegacyFileName, "execution.checkpointing.num-retained: 2\nexecution.checkpointing.interval: 5 s\n")
	l, err := Load(Sources{ConfigDir: dir, Dynamic: []string{"state.checkpoints.num-retained=4", "execution.checkpointing.interval=abc", "flag"}})
	if err != nil {
		t.Fatal(err)
	}
	// -D under a deprecated name still overrides the file's current name.
	if n, _ := testRetained.Get(l.Config); n != 4 {
		t.Errorf("num-retained = %d; want 4 from -D", n)
	}
	if v, _ := l.Config.Get("flag"); v.Raw != "true" {
		t.Errorf("-Dflag = %q; want true", v.Raw)
	}
	_, err = testInterval.Get(l.Config)
	want := "Invalid value 'abc' for configuration key 'execution.checkpointing.interval' (from -D): text does not start with a number. Accepted: " + durationAccepted + "."
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
	// Explicit flags beat -D.
	l.Config.SetString("execution.checkpointing.num-retained", "9", "--num")
	l.Config.Set("execution.checkpointing.num-retained", "1", Origin{Layer: LayerDynamic, Flag: "-D"})
	if n, _ := testRetained.Get(l.Config); n != 9 {
		t.Errorf("num-retained = %d; want 9 from the flag", n)
	}

	l2, _ := Load(Sources{ConfigDir: dir})
	l2.Config.Set("execution.checkpointing.mode", "sometimes", Origin{Layer: LayerFile, File: path, Line: 7})
	err = Validate(l2.Config, []AnyOption{testInterval, testMode})
	want = "Invalid value 'sometimes' for configuration key 'execution.checkpointing.mode' (from " + path + ":7): Could not parse value for enum CheckpointingMode. Expected one of: [EXACTLY_ONCE, AT_LEAST_ONCE]. Accepted: one of EXACTLY_ONCE, AT_LEAST_ONCE (case-insensitive)."
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
}

func TestDynamicProperty(t *testing.T) {
	for in, want := range map[string][2]string{
		"k=v": {"k", "v"}, "k=a=b": {"k", "a=b"}, "flag": {"flag", "true"}, "k=": {"k", ""},
	} {
		k, v, err := ParseDynamicProperty(in)
		if err != nil || k != want[0] || v != want[1] {
			t.Errorf("ParseDynamicProperty(%q) = %q, %q, %v", in, k, v, err)
		}
	}
	if _, _, err := ParseDynamicProperty("=v"); err == nil {
		t.Error("empty key must be an error")
	}
}

func TestMisspellings(t *testing.T) {
	c := New()
	c.SetString("execution.checkpointing.intervall", "1s", "-D")       // one insertion
	c.SetString("execution.checkpointing.mdoe", "AT_LEAST_ONCE", "-D") // a transposition: two edits
	c.SetString("state.checkpoints.num-retained", "2", "-D")           // a deprecated name: known
	c.SetString("taskmanager.numberOfTaskSlots", "4", "-D")            // Flink's, far from gflink's
	c.SetString("execution.checkpointing.interval", "1s", "-D")        // known
	c.SetString("state.checkpoint.num-retained", "2", "-D")            // near the deprecated name
	got := Misspellings(c, []AnyOption{testInterval, testMode, testRetained})
	want := []string{
		"Configuration key 'execution.checkpointing.intervall' (from -D) is not one gflink knows, so it has no effect; did you mean 'execution.checkpointing.interval'?",
		"Configuration key 'execution.checkpointing.mdoe' (from -D) is not one gflink knows, so it has no effect; did you mean 'execution.checkpointing.mode'?",
		"Configuration key 'state.checkpoint.num-retained' (from -D) is not one gflink knows, so it has no effect; did you mean 'state.checkpoints.num-retained' (now 'execution.checkpointing.num-retained')?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Misspellings =\n%q\nwant\n%q", got, want)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"", "", 3, 0}, {"abc", "abc", 3, 0}, {"abc", "abd", 3, 1}, {"abc", "acb", 3, 2},
		{"kitten", "sitting", 5, 3}, {"kitten", "sitting", 3, 3}, {"a", "abcdef", 3, 3},
	} {
		if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d; want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
	}
}
