package cmd

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gflink/gflink/connectors"
	"github.com/gflink/gflink/engine"
	"github.com/gflink/gflink/engine/cluster"
	"github.com/gflink/gflink/engine/jobregistry"
	"github.com/gflink/gflink/engine/jobs"
	"github.com/gflink/gflink/internal/testutil"
	"github.com/gflink/gflink/restore"
	"github.com/gflink/gflink/savepoint/vfs"
	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the gflink binary: for the scripts
	// (testscript runs it as "gflink") and for tests that start and kill
	// gflink processes (GFLINK_AS_MAIN).
	if os.Getenv("GFLINK_AS_MAIN") == "1" || os.Getenv(cluster.DetachedChildEnv) == "1" {
		os.Exit(Main())
	}
	testscript.Main(leakChecked{m}, map[string]func(){
		"gflink": func() { os.Exit(MainWith(testJobs(), os.Args[1:])) },
	})
}

// testJobs are the built-in jobs plus variants of word count that a
// changed program would be: a stateful operator renamed (its old state
// no longer maps), and one without a uid.
func testJobs() *jobs.Registry {
	variant := func(name, counterUID string) jobs.Job {
		return jobs.Job{Name: name, Build: func(env *engine.Environment, args []string) error {
			o, err := jobs.ParseWordCountArgs(args)
			if err != nil {
				return err
			}
			src := &connectors.TextFileSource{Paths: o.Inputs, Rate: o.Rate, Weigh: jobs.CountWords}
			lines := engine.FromSource[string](env, src, "file-input").UID("source")
			words := engine.FlatMap(lines, jobs.Tokenize).Name("tokenizer")
			counts := engine.Process(engine.KeyBy(words, func(w string) string { return w }), &jobs.Counter{}).Name("counter")
			if counterUID != "" {
				counts = counts.UID(counterUID)
			}
			counts.Print().UID("sink")
			return nil
		}}
	}
	return jobs.Builtin().With(variant("wordcount-v2", "counter-v2"), variant("wordcount-nouid", ""))
}

// leakChecked runs the tests, then fails if any goroutine outlived them.
type leakChecked struct{ m *testing.M }

func (l leakChecked) Run() int {
	code := l.m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines outlived the tests:", err)
			return 1
		}
	}
	return code
}

func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(filepath.Join("testdata", "script"), nil))
}

// TestOwnModule builds a gflink of a user's own, in a fresh module outside
// the repository that requires gflink through a replace directive, and
// operates its job with every verb (testdata/module).
func TestOwnModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary: skipped with -short")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GONOSUMDB", "GOSUMDB", "GOTOOLCHAIN"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		goEnv[k] = strings.TrimSpace(string(out))
	}
	testscript.Run(t, scriptParams(filepath.Join("testdata", "module"), func(env *testscript.Env) {
		env.Setenv("GFLINK_REPO", repo)
		for k, v := range goEnv {
			env.Setenv(k, v)
		}
	}))
}

// TestScriptsRocksDB runs the scripts of the state flows — kill -9 and
// recovery, restore and claim modes, rescaling, stop-with-savepoint, the
// file sink's restore — again with state.backend.type: rocksdb, set in a
// configuration directory (GFLINK_CONF_DIR) as a user would set it.
func TestScriptsRocksDB(t *testing.T) {
	rerunScripts(t, "state.backend.type: rocksdb\n", "rocksdb", "exec gflink run wordcount\nstderr 'Using the embedded LSM state backend \\(Pebble\\) for state.backend.type=rocksdb'\n\n")
}

// TestScriptsChangelog runs the same scripts with the changelog state
// backend (its log on the filesystem, materialized every 200 ms) over
// hashmap and over rocksdb.
func TestScriptsChangelog(t *testing.T) {
	for _, backend := range []string{"hashmap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			conf := fmt.Sprintf("state.backend.type: %s\nstate.changelog.enabled: true\nstate.changelog.storage: filesystem\nstate.changelog.dstl.dfs.base-path: %s\nstate.changelog.periodic-materialize.interval: 200 ms\n",
				backend, filepath.Join(t.TempDir(), "dstl"))
			rerunScripts(t, conf, backend,
				"exec gflink run -Dexecution.checkpointing.interval=1s -Dexecution.checkpointing.dir=$WORK/proof wordcount\nstderr 'Using the changelog state backend over "+backend+"'\n\n",
				// The job's checkpoints are the changelog's.
				`checkpoint \(full\) +NATIVE`, `checkpoint \(changelog: (materializations? [0-9-]+|not materialized yet), log [0-9.]+ [KM]?i?B\) +NATIVE`)
		})
	}
}

// rerunScripts runs the state-flow scripts again with conf in a
// configuration directory (GFLINK_CONF_DIR), as a user would set it: each
// starts with proof, a few lines showing the configuration took effect;
// what inspect says of a checkpoint names backend; replace lists further
// old, new pairs of script text.
func rerunScripts(t *testing.T, conf, backend, proof string, replace ...string) {
	if testutil.Quick() {
		t.Skip("-short or -race: the scripts run once, with the default backend (the plain run repeats them on every backend)")
	}
	confDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	replace = append(replace, "NATIVE format, hashmap state backend", "NATIVE format, "+backend+" state backend")
	scripts := t.TempDir()
	for _, name := range []string{"recovery", "restore", "rescale", "filesink_restore", "operate", "interrupt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "script", name+".txtar"))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer(replace...).Replace(string(b))
		if err := os.WriteFile(filepath.Join(scripts, name+".txtar"), []byte(proof+text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	testscript.Run(t, scriptParams(scripts, func(env *testscript.Env) {
		env.Setenv("GFLINK_CONF_DIR", confDir)
	}))
}

func scriptParams(dir string, setup func(*testscript.Env)) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, ".gflink")
			env.Setenv("GFLINK_HOME", home)
			env.Setenv("NO_COLOR", "1")
			// dumpJob's SIGQUIT then shows every goroutine of a stuck job.
			env.Setenv("GOTRACEBACK", "all")
			// No job process outlives its script, whatever happened.
			env.Defer(func() { killJobs(home) })
			if setup != nil {
				setup(env)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"code":          cmdCode,
			"waitchk":       cmdWaitChk,
			"finalcounts":   cmdFinalCounts,
			"wcexpect":      cmdWCExpect,
			"genwords":      cmdGenWords,
			"waitfile":      cmdWaitFile,
			"latestchk":     cmdLatestChk,
			"cpdir":         cmdCpDir,
			"globcount":     cmdGlobCount,
			"countsatleast": cmdCountsAtLeast,
			"capture":       cmdCapture,
			"jsonget":       cmdJSONGet,
			"waitstate":     cmdWaitState,
			"killjob":       cmdKillJob,
			"hashdir":       cmdHashDir,
			"waitgone":      cmdWaitGone,
			"corrupt":       cmdCorrupt,
			"kafka":         cmdKafka,
		},
	}
}

// code N cmd args... runs a command like exec and checks its exit code.
func cmdCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: code <exit code> command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("bad exit code %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("%v", err)
	}
	if got != want {
		ts.Fatalf("exit code %d; want %d", got, want)
	}
}

// finalcounts [-nodups] out src... reads (word,count) updates from files
// (print output; "stdout" is the last command's) and from directories
// (finished part files only) and writes each word's final count, sorted.
// With -nodups it fails if any (word,count) update appears twice.
func cmdFinalCounts(ts *testscript.TestScript, neg bool, args []string) {
	nodups := len(args) > 0 && args[0] == "-nodups"
	if nodups {
		args = args[1:]
	}
	if len(args) < 2 {
		ts.Fatalf("usage: finalcounts [-nodups] out src...")
	}
	final := map[string]int64{}
	seen := map[string]bool{}
	read := func(text string) {
		for _, l := range strings.Split(text, "\n") {
			if i := strings.Index(l, "> "); i > 0 && i < 4 {
				l = l[i+2:]
			}
			r, ok := jobs.ParseWordCountRecord(l)
			if !ok {
				continue
			}
			if nodups && seen[l] {
				ts.Fatalf("update %s appears twice", l)
			}
			seen[l] = true
			final[r.Word] = max(final[r.Word], r.Count)
		}
	}
	for _, src := range args[1:] {
		if src == "stdout" {
			read(ts.ReadFile("stdout"))
			continue
		}
		p := ts.MkAbs(src)
		st, err := os.Stat(p)
		ts.Check(err)
		if !st.IsDir() {
			read(ts.ReadFile(src))
			continue
		}
		entries, err := os.ReadDir(p)
		ts.Check(err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "part-") {
				b, err := os.ReadFile(filepath.Join(p, e.Name()))
				ts.Check(err)
				read(string(b))
			}
		}
	}
	writeCounts(ts, args[0], final)
}

func writeCounts(ts *testscript.TestScript, out string, m map[string]int64) {
	words := make([]string, 0, len(m))
	for w := range m {
		words = append(words, w)
	}
	slices.Sort(words)
	var b strings.Builder
	for _, w := range words {
		fmt.Fprintf(&b, "%s %d\n", w, m[w])
	}
	ts.Check(os.WriteFile(ts.MkAbs(out), []byte(b.String()), 0o644))
}

type collect func(string)

func (c collect) Collect(s string) { c(s) }

// wcexpect out [file...] counts words the way word count does, directly:
// in the given text files, or in the built-in text.
func cmdWCExpect(ts *testscript.TestScript, neg bool, args []string) {
	m := map[string]int64{}
	count := collect(func(w string) { m[w]++ })
	if len(args) == 1 {
		for _, l := range jobs.HamletLines {
			jobs.Tokenize(l, count)
		}
	}
	for _, f := range args[1:] {
		fh, err := os.Open(ts.MkAbs(f))
		ts.Check(err)
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			jobs.Tokenize(sc.Text(), count)
		}
		fh.Close()
	}
	writeCounts(ts, args[0], m)
}

// genwords file lines distinct writes generated text.
func cmdGenWords(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: genwords file lines distinct")
	}
	lines, _ := strconv.ParseInt(args[1], 10, 64)
	distinct, _ := strconv.Atoi(args[2])
	g := &connectors.WordGenerator{Distinct: distinct, Seed: 11, WordsPerLine: 10}
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	w := bufio.NewWriter(f)
	var buf []byte
	for i := int64(0); i < lines; i++ {
		buf = g.Line(i, buf)
		w.Write(buf)
		w.WriteByte('\n')
	}
	ts.Check(w.Flush())
	ts.Check(f.Close())
}

// waitfile glob waits (up to 60 s) until the glob matches a file.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	deadline := testutil.Deadline(60 * time.Second)
	for {
		m, _ := filepath.Glob(ts.MkAbs(args[0]))
		if len(m) > 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s did not appear within 60 s", args[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitchk DIR N waits until DIR (a job's checkpoint directory) holds a
// complete checkpoint numbered N or higher. Not chk-N itself: with one
// checkpoint retained, each lives only until the next completes, and a
// loaded machine can let the poll miss it.
func cmdWaitChk(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitchk DIR N")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("waitchk: %v", err)
	}
	deadline := testutil.Deadline(60 * time.Second)
	for {
		ids, _ := restore.CheckpointIDs(vfs.Default, ts.MkAbs(args[0]))
		for _, id := range ids {
			meta := filepath.Join(ts.MkAbs(args[0]), fmt.Sprintf("chk-%d", id), "_metadata")
			if _, err := os.Stat(meta); err == nil && id >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no checkpoint numbered %d or higher completed in %s within 60 s (scaled)", n, args[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// capture VAR regexp sets VAR to the first group of regexp in the last
// command's stdout.
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	re := regexp.MustCompile("(?m)" + args[1])
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil || len(m) < 2 {
		ts.Fatalf("no match for %s in stdout", args[1])
	}
	ts.Setenv(args[0], m[1])
}

// jsonget VAR file path sets VAR to a value in a JSON file ("stdout" is
// the last command's): path is dotted, with numbers indexing arrays. The
// file must hold exactly one JSON value.
func cmdJSONGet(ts *testscript.TestScript, neg bool, args []string) {
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile(args[1])))
	var v any
	if err := dec.Decode(&v); err != nil {
		ts.Fatalf("%s is not JSON: %v", args[1], err)
	}
	if dec.More() {
		ts.Fatalf("%s holds more than one JSON value", args[1])
	}
	for _, k := range strings.Split(args[2], ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(x) {
				ts.Fatalf("%s: no element %s", args[2], k)
			}
			v = x[i]
		default:
			ts.Fatalf("%s: %s is not an object or array", args[2], k)
		}
	}
	if v == nil {
		ts.Fatalf("%s: no value at %s", args[1], args[2])
	}
	switch x := v.(type) {
	case string:
		ts.Setenv(args[0], x)
	default:
		b, _ := json.Marshal(x)
		ts.Setenv(args[0], string(b))
	}
}

// waitstate JOB STATE waits (up to 60 s) until the registry shows the job
// in STATE.
func cmdWaitState(ts *testscript.TestScript, neg bool, args []string) {
	reg := jobregistry.NewRegistry(ts.Getenv("GFLINK_HOME"))
	deadline := testutil.Deadline(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		if e, err := reg.Get(args[0]); err == nil {
			last = e.State
			if e.State == args[1] {
				return
			}
			if e.Terminal() {
				// An ended job's status does not change.
				dumpJob(ts, reg, args[0])
				ts.Fatalf("job %s ended %s, not %s", args[0], e.State, args[1])
			}
		} else if _, lerr := reg.Lost(args[0]); lerr == nil {
			// Its process died without ending the job: it never will.
			dumpJob(ts, reg, args[0])
			ts.Fatalf("job %s was %q when its process died, not %s", args[0], last, args[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
	dumpJob(ts, reg, args[0])
	ts.Fatalf("job %s is %q, not %s, after 60 s", args[0], last, args[1])
}

// dumpJob logs what a job that did not reach a state was doing: a job
// still running is sent SIGQUIT, whose goroutine dump (like the job's log)
// goes to the job's log file, and that file's tail is printed, so that a
// hang seen once in CI can be diagnosed from CI's output alone.
func dumpJob(ts *testscript.TestScript, reg *jobregistry.Registry, jobID string) {
	e, err := reg.Get(jobID)
	// Only an unended entry from Get has a process known to be the job's
	// (Get checked it): the pid of an ended or lost job may be another
	// program's, or another script's job, by now.
	live := err == nil && !e.Terminal()
	if err != nil {
		e, err = reg.Lost(jobID)
	}
	if err != nil || e.Log == "" {
		return
	}
	if p, err := os.FindProcess(e.PID); live && err == nil && p.Signal(syscall.SIGQUIT) == nil {
		// The dump is written before the process exits (it may stay a
		// zombie, which Alive counts as gone).
		for deadline := testutil.Deadline(10 * time.Second); time.Now().Before(deadline) && reg.Alive(e.PID); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	b, err := os.ReadFile(e.Log)
	if err != nil {
		return
	}
	const tail = 48 << 10
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	ts.Logf("the tail of the job's log %s:\n%s", e.Log, b)
}

// hashdir VAR dir sets VAR to a hash of a directory's file names and
// contents (to check that a snapshot is byte-for-byte unchanged).
func cmdHashDir(ts *testscript.TestScript, neg bool, args []string) {
	dir := ts.MkAbs(args[1])
	entries, err := os.ReadDir(dir)
	ts.Check(err)
	h := sha256.New()
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		ts.Check(err)
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	ts.Setenv(args[0], fmt.Sprintf("%x", h.Sum(nil)))
}

// waitgone path waits (up to 60 s) until path no longer exists.
func cmdWaitGone(ts *testscript.TestScript, neg bool, args []string) {
	deadline := testutil.Deadline(60 * time.Second)
	for {
		if _, err := os.Stat(ts.MkAbs(args[0])); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s still exists after 60 s", args[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// corrupt file flips one byte in the middle of a file; a pattern
// (filepath.Glob) flips one in each file it matches, and must match one.
func cmdCorrupt(ts *testscript.TestScript, neg bool, args []string) {
	files, err := filepath.Glob(ts.MkAbs(args[0]))
	ts.Check(err)
	if len(files) == 0 {
		ts.Fatalf("no file matches %s", args[0])
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		ts.Check(err)
		b[len(b)/2] ^= 0xff
		ts.Check(os.WriteFile(p, b, 0o644))
	}
}

// killjob JOB kills the process running a job with SIGKILL and waits for
// it to be gone.
func cmdKillJob(ts *testscript.TestScript, neg bool, args []string) {
	reg := jobregistry.NewRegistry(ts.Getenv("GFLINK_HOME"))
	e, err := reg.Get(args[0])
	if err != nil {
		ts.Fatalf("job %s: %v", args[0], err)
	}
	p, err := os.FindProcess(e.PID)
	ts.Check(err)
	ts.Check(p.Kill())
	deadline := testutil.Deadline(30 * time.Second)
	for (reg.Alive(e.PID) || threadsLeft(e.PID)) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// threadsLeft reports whether threads of a killed process other than its
// leader are still exiting: the leader turns zombie while they do, and the
// process's files — its LSM directory's lock among them — are closed only
// when the last of them has exited.
func threadsLeft(pid int) bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err == nil && len(ents) > 1
}

// killJobs kills the processes of jobs still registered as running.
func killJobs(home string) {
	entries, _ := jobregistry.NewRegistry(home).List()
	for _, e := range entries {
		if !e.Terminal() && e.PID > 0 && e.PID != os.Getpid() {
			if p, err := os.FindProcess(e.PID); err == nil {
				p.Kill()
			}
		}
	}
}

// countsatleast got want checks that every word of want is counted in got,
// and no lower (what AT_LEAST_ONCE promises).
func cmdCountsAtLeast(ts *testscript.TestScript, neg bool, args []string) {
	read := func(f string) map[string]int64 {
		m := map[string]int64{}
		for _, l := range strings.Split(ts.ReadFile(f), "\n") {
			w, n, ok := strings.Cut(l, " ")
			if ok {
				c, _ := strconv.ParseInt(n, 10, 64)
				m[w] = c
			}
		}
		return m
	}
	got, want := read(args[0]), read(args[1])
	for w, n := range want {
		if got[w] < n {
			ts.Fatalf("count of %q is %d; want at least %d", w, got[w], n)
		}
	}
	if len(got) != len(want) {
		ts.Fatalf("%d words counted; want %d", len(got), len(want))
	}
}

// globcount N pattern checks how many paths match a glob.
func cmdGlobCount(ts *testscript.TestScript, neg bool, args []string) {
	want, _ := strconv.Atoi(args[0])
	m, err := filepath.Glob(ts.MkAbs(args[1]))
	ts.Check(err)
	if len(m) != want {
		ts.Fatalf("%s matches %d paths %v; want %d", args[1], len(m), m, want)
	}
}

// cpdir src dst copies a directory's files, hidden ones included.
func cmdCpDir(ts *testscript.TestScript, neg bool, args []string) {
	src, dst := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	ts.Check(err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
}

// latestchk VAR dir sets VAR to the newest complete chk-N directory under
// dir/<jobId>/.
func cmdLatestChk(ts *testscript.TestScript, neg bool, args []string) {
	jobDirs, _ := filepath.Glob(filepath.Join(ts.MkAbs(args[1]), "*"))
	for _, jd := range jobDirs {
		found, _, err := restore.LatestCheckpoint(vfs.Default, jd)
		if err == nil && found != nil {
			ts.Setenv(args[0], found.Dir)
			ts.Setenv(args[0]+"_ID", strconv.FormatInt(found.Metadata.CheckpointID, 10))
			ts.Setenv(args[0]+"_NEXT", strconv.FormatInt(found.Metadata.CheckpointID+1, 10))
			return
		}
	}
	ts.Fatalf("no complete checkpoint under %s", args[1])
}
