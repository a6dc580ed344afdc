package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is gflink's version.
const Version = "0.1.0"

// globalOptions are accepted by every action (Flink's "custom command
// line" options, and gflink's own).
type globalOptions struct {
	Dynamic    []string
	ConfigDir  string
	JobManager string
	Output     string
	// Token is the REST token sent with -m (--token).
	Token string
}

// action describes one verb for help texts.
type action struct {
	name, header, syntax string
	build                func(f *Factory, g *globalOptions) *cobra.Command
}

func actions() []action {
	return []action{
		{"run", `Action "run" compiles and runs a program.`, "run [OPTIONS] <job> <arguments>", realCmd(newRunCmd)},
		{"list", `Action "list" lists running and scheduled programs.`, "list [OPTIONS]", realCmd(newListCmd)},
		{"stop", `Action "stop" stops a running program with a savepoint (streaming jobs only).`, "stop [OPTIONS] <Job ID>", realCmd(newStopCmd)},
		{"cancel", `Action "cancel" cancels a running program.`, "cancel [OPTIONS] <Job ID>", realCmd(newCancelCmd)},
		{"savepoint", `Action "savepoint" triggers savepoints for a running job or disposes existing ones.`, "savepoint [OPTIONS] <Job ID> [<target directory>]", realCmd(newSavepointCmd)},
		{"checkpoint", `Action "checkpoint" triggers checkpoints for a running job.`, "checkpoint [OPTIONS] <Job ID>", realCmd(newCheckpointCmd)},
		{"checkpoints", `Action "checkpoints" lists the retained checkpoints and savepoints of a job or a directory.`, "checkpoints [OPTIONS] <Job ID | directory>", realCmd(newCheckpointsCmd)},
		{"inspect", `Action "inspect" shows what a checkpoint or savepoint holds.`, "inspect [OPTIONS] <snapshot path>", realCmd(newInspectCmd)},
	}
}

// realCmd builds a verb's command without a runF, so that it runs the
// verb: what gflink executes, and what help prints (with f nil). Tests
// call the verb's constructor with a runF instead.
func realCmd[O any](newCmd func(*Factory, *globalOptions, func(*O) error) *cobra.Command) func(*Factory, *globalOptions) *cobra.Command {
	return func(f *Factory, g *globalOptions) *cobra.Command { return newCmd(f, g, nil) }
}

func lookupAction(name string) (action, bool) {
	for _, a := range actions() {
		if a.name == name {
			return a, true
		}
	}
	return action{}, false
}

func actionNames() []string {
	var out []string
	for _, a := range actions() {
		out = append(out, a.name)
	}
	return out
}

// Run executes one command line and returns its exit code.
func Run(f *Factory, args []string) int {
	f.Args = args
	if len(args) == 0 {
		printGeneralHelp(f.IO.Out)
		fmt.Fprintln(f.IO.Out, "Please specify an action.")
		return ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		printGeneralHelp(f.IO.Out)
		return ExitOK
	case "-v", "--version":
		fmt.Fprintln(f.IO.Out, versionLine())
		return ExitOK
	}
	if msg, ok := unsupportedActions[args[0]]; ok {
		fmt.Fprintln(f.IO.Out, msg)
		return ExitUsage
	}
	act, ok := lookupAction(args[0])
	if !ok {
		names := actionNames()
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = `"` + n + `"`
		}
		list := strings.Join(quoted[:len(quoted)-1], ", ")
		if len(quoted) > 1 {
			list += ", or " + quoted[len(quoted)-1]
		} else {
			list = quoted[0]
		}
		fmt.Fprintf(f.IO.Out, "\"%s\" is not a valid action.\n\nValid actions are %s.\n\nSpecify the version option (-v or --version) to print gflink version.\n\nSpecify the help option (-h or --help) to get help on the command.\n", args[0], list)
		return ExitUsage
	}
	g := &globalOptions{}
	err := execute(f, act, act.build(f, g), g, args)
	reportError(f.IO, err, g.Output == "json")
	return exitCode(err)
}

// execute runs an action's command c (built with g) on argv, args[0]
// being the action: it refuses the long spelling of a short-only option,
// adds the global flags, normalises Flink's one-dash spellings and turns
// cobra's errors into Flink's. Run goes through it, and so do the tests
// that give c a runF to see the options alone.
func execute(f *Factory, act action, c *cobra.Command, g *globalOptions, args []string) error {
	if err := checkShortOnly(args); err != nil {
		// Refused before the flags are parsed: read -o json from argv.
		if asksForJSON(args) {
			g.Output = "json"
		}
		return err
	}
	addGlobalFlags(c, g)
	c.SilenceErrors, c.SilenceUsage = true, true
	c.SetOut(f.IO.Out)
	c.SetErr(f.IO.ErrOut)
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flinkFlagError(err) })
	if check := c.Args; check != nil {
		// Argument errors are usage errors, reported as Flink reports a
		// CliArgsException (stdout, exit 2), whoever raised them.
		c.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			var u *UsageError
			if err != nil && !errors.As(err, &u) {
				return usageErrorf("%s", err)
			}
			return err
		}
	}
	c.SetHelpFunc(func(c *cobra.Command, _ []string) { printActionHelp(f.IO.Out, act, c) })
	c.SetArgs(normalizeArgs(args)[1:])
	return c.ExecuteContext(f.Context)
}

func reportError(io *IOStreams, err error, asJSON bool) {
	if err == nil {
		return
	}
	if asJSON {
		// Scripts get data: one JSON object on stdout, even for errors.
		var s *SilentError
		if !errors.As(err, &s) {
			b, _ := json.Marshal(map[string]any{"error": err.Error(), "exitCode": exitCode(err)})
			fmt.Fprintln(io.Out, string(b))
			fmt.Fprintln(io.ErrOut, err)
		}
		return
	}
	var s *SilentError
	if errors.As(err, &s) {
		return
	}
	var u *UsageError
	if errors.As(err, &u) {
		// Flink prints command-line errors to stdout, with a hint.
		fmt.Fprintf(io.Out, "%s\n\nUse the help option (-h or --help) to get help on the command.\n", u.Msg)
		return
	}
	fmt.Fprintln(io.ErrOut, err)
}

// flinkFlagError rewrites pflag's messages into commons-cli's.
func flinkFlagError(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "unknown flag: "):
		return usageErrorf("Unrecognized option: %s", strings.TrimPrefix(msg, "unknown flag: "))
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		if i := strings.LastIndex(msg, " in "); i >= 0 {
			return usageErrorf("Unrecognized option: %s", msg[i+4:])
		}
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimPrefix(msg, "flag needs an argument: ")
		if i := strings.Index(name, " in "); i >= 0 {
			name = name[:i]
		}
		return usageErrorf("Missing argument for option: %s", strings.Trim(name, "'-"))
	}
	return usageErrorf("%s", msg)
}

func addGlobalFlags(c *cobra.Command, g *globalOptions) {
	fl := c.Flags()
	fl.StringArrayVarP(&g.Dynamic, "D", "D", nil, "Allows specifying multiple generic configuration options, e.g. -Dexecution.checkpointing.interval=10s")
	fl.Lookup("D").Annotations = map[string][]string{"display": {"-D <property=value>"}}
	fl.StringVar(&g.ConfigDir, "config-dir", "", "The configuration directory (default: $GFLINK_CONF_DIR, $FLINK_CONF_DIR, ./conf, or conf/ beside the binary)")
	fl.SetAnnotation("config-dir", "argname", []string{"dir"})
	fl.StringVarP(&g.JobManager, "jobmanager", "m", "", "Address of the JobManager (host:port) to which to connect")
	fl.StringVar(&g.Token, "token", "", "The secret token of a gflink job's REST endpoint, sent with -m (default: $GFLINK_REST_TOKEN, else the token of the job registered at that address in $GFLINK_HOME/jobs)")
	fl.SetAnnotation("token", "argname", []string{"token"})
	fl.StringVarP(&g.Output, "output", "o", "", "Output format: json prints exactly one JSON object on stdout")
	fl.SetAnnotation("output", "argname", []string{"format"})
	fl.BoolP("help", "h", false, "Show the help message for the action")
}

func versionLine() string {
	commit := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				commit = s.Value[:7]
			}
		}
	}
	if commit == "" {
		return "Version: " + Version
	}
	return "Version: " + Version + ", Commit ID: " + commit
}

// oneDash lists options Flink spells with a single dash although they have
// several letters.
var oneDash = map[string]string{
	"claimMode": "cm", "restoreMode": "rm", "shutdownOnAttachedExit": "sae",
	"type": "type", "detached": "detached", "full": "full",
}

func printGeneralHelp(w io.Writer) {
	fmt.Fprintln(w, "gflink <ACTION> [OPTIONS] [ARGUMENTS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The following actions are available:")
	for _, a := range actions() {
		fmt.Fprintln(w)
		g := &globalOptions{}
		c := a.build(nil, g)
		printActionBlock(w, a, c)
	}
	fmt.Fprintln(w)
	g := &globalOptions{}
	c := &cobra.Command{}
	addGlobalFlags(c, g)
	printFlags(w, "  Options for default mode:", c.Flags(), true)
}

func printActionHelp(w io.Writer, a action, c *cobra.Command) {
	printActionBlock(w, a, c)
	g := &globalOptions{}
	gc := &cobra.Command{}
	addGlobalFlags(gc, g)
	printFlags(w, "  Options for default mode:", gc.Flags(), true)
}

func printActionBlock(w io.Writer, a action, c *cobra.Command) {
	fmt.Fprintln(w, a.header)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  Syntax: %s\n", a.syntax)
	if c.Long != "" {
		for _, line := range wrap(c.Long, 74) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	printFlags(w, fmt.Sprintf("  %q action options:", a.name), c.LocalNonPersistentFlags(), false)
}

func isGlobal(name string) bool {
	return slices.Contains([]string{"D", "config-dir", "jobmanager", "output", "token", "help"}, name)
}

// printFlags renders flags the way commons-cli's HelpFormatter does: width
// 80, left padding 5, descriptions aligned and wrapped.
func printFlags(w io.Writer, title string, fs *pflag.FlagSet, global bool) {
	type row struct{ left, desc string }
	var rows []row
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || isGlobal(f.Name) != global || f.Name == "help" {
			return
		}
		left := ""
		if d := f.Annotations["display"]; len(d) > 0 {
			left = d[0]
		} else {
			switch {
			case f.Shorthand != "":
				left = "-" + f.Shorthand + ",--" + f.Name
			case oneDash[f.Name] == f.Name && f.Name == "detached":
				left = "-detached"
			case oneDash[f.Name] != "":
				left = "-" + oneDash[f.Name] + ",--" + f.Name
			default:
				left = "--" + f.Name
			}
			if f.Value.Type() != "bool" {
				arg := "arg"
				if a := f.Annotations["argname"]; len(a) > 0 {
					arg = a[0]
				}
				left += " <" + arg + ">"
			}
		}
		rows = append(rows, row{left, f.Usage})
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, title)
	width := 0
	for _, r := range rows {
		width = max(width, len(r.left))
	}
	descWidth := max(80-5-width-3, 30)
	for _, r := range rows {
		lines := wrap(r.desc, descWidth)
		if len(lines) == 0 {
			lines = []string{""}
		}
		fmt.Fprintf(w, "     %-*s   %s\n", width, r.left, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "     %-*s   %s\n", width, "", l)
		}
	}
}

func wrap(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, word := range strings.Fields(s) {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
