package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// The two file names Flink reads from a configuration directory.
const (
	LegacyFileName = "flink-conf.yaml" // flat key: value, Flink 1.x
	FileName       = "config.yaml"     // nested YAML, Flink 1.19+
)

// Sources says where configuration may come from. Zero fields mean "not
// given".
type Sources struct {
	// ConfigDir is --config-dir.
	ConfigDir string
	// Getenv reads the environment (GFLINK_CONF_DIR, FLINK_CONF_DIR).
	Getenv func(string) string
	// WorkingDir is where ./conf is looked for.
	WorkingDir string
	// ExecutableDir is where conf/ beside the binary is looked for.
	ExecutableDir string
	// Dynamic holds the -D arguments in command-line order, each "key=value"
	// or "key".
	Dynamic []string
}

// Loaded is a configuration and where it was read from.
type Loaded struct {
	Config *Configuration
	// Dir is the configuration directory used, "" for built-in defaults.
	Dir string
	// File is the configuration file read, "" for none.
	File string
	// Warnings are problems that did not stop loading, such as lines of
	// flink-conf.yaml that are not key-value pairs (Flink ignores them too).
	Warnings []string
}

// Load finds the configuration directory, reads its file and applies -D.
//
// The directory is --config-dir, else $GFLINK_CONF_DIR, else
// $FLINK_CONF_DIR (each must exist), else ./conf, else conf/ beside the
// binary (each used only if it holds a configuration file), else none: the
// built-in defaults. In a directory flink-conf.yaml wins over config.yaml, as
// in Flink 1.19 and 1.20.
func Load(src Sources) (*Loaded, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	l := &Loaded{Config: New()}
	dir, explicit, err := findDir(src, getenv)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		file, err := configFileIn(dir)
		if err != nil {
			return nil, err
		}
		if file == "" && explicit {
			return nil, fmt.Errorf("The configuration directory '%s' contains neither %s nor %s.", dir, LegacyFileName, FileName)
		}
		if file != "" {
			if other := filepath.Join(dir, FileName); filepath.Base(file) == LegacyFileName && isFile(other) {
				// Flink 1.19/1.20 silently prefer the legacy file; a user who
				// edits config.yaml would wonder why nothing changes.
				l.Warnings = append(l.Warnings, fmt.Sprintf("Both %s and %s are in %s: using %s (as Flink 1.19 and 1.20 do) and ignoring %s. Remove one of them.",
					LegacyFileName, FileName, dir, file, other))
			}
			l.Dir, l.File = dir, file
			if err := l.readFile(file); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range src.Dynamic {
		key, value, err := ParseDynamicProperty(d)
		if err != nil {
			return nil, err
		}
		l.Config.Set(key, value, Origin{Layer: LayerDynamic, Flag: "-D"})
	}
	return l, nil
}

// findDir resolves the configuration directory; explicit reports whether the
// user named it (so that it must exist and hold a file).
func findDir(src Sources, getenv func(string) string) (dir string, explicit bool, err error) {
	if src.ConfigDir != "" {
		if !isDir(src.ConfigDir) {
			abs, _ := filepath.Abs(src.ConfigDir)
			return "", false, fmt.Errorf("The given configuration directory name '%s' (%s) does not describe an existing directory.", src.ConfigDir, abs)
		}
		return src.ConfigDir, true, nil
	}
	for _, env := range []string{"GFLINK_CONF_DIR", "FLINK_CONF_DIR"} {
		if d := getenv(env); d != "" {
			if !isDir(d) {
				return "", false, fmt.Errorf("The configuration directory '%s', specified in the '%s' environment variable, does not exist.", d, env)
			}
			return d, true, nil
		}
	}
	for _, base := range []string{src.WorkingDir, src.ExecutableDir} {
		if base == "" {
			continue
		}
		d := filepath.Join(base, "conf")
		if f, _ := configFileIn(d); f != "" {
			return d, false, nil
		}
	}
	return "", false, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func configFileIn(dir string) (string, error) {
	for _, name := range []string{LegacyFileName, FileName} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err == nil && !st.IsDir() {
			return p, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read configuration file: %w", err)
		}
	}
	return "", nil
}

func (l *Loaded) readFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read configuration file: %w", err)
	}
	if filepath.Base(path) == LegacyFileName {
		l.Warnings = append(l.Warnings, parseFlat(data, path, l.Config)...)
		return nil
	}
	return parseYAML(data, path, l.Config)
}

// parseFlat reads Flink 1.x's flink-conf.yaml: "key: value" per line;
// everything after the first '#' is a comment; lines that are not key-value
// pairs are skipped with a warning; a repeated key takes the last value.
func parseFlat(data []byte, path string, c *Configuration) (warnings []string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		key, value, ok := strings.Cut(text, ": ")
		if !ok {
			warnings = append(warnings, fmt.Sprintf("Error while trying to split key and value in configuration file %s:%d: Line is not a key-value pair (missing space after ':'?)", path, line))
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if key == "" || value == "" {
			warnings = append(warnings, fmt.Sprintf("Error after splitting key and value in configuration file %s:%d: Key or value was empty", path, line))
			continue
		}
		c.Set(key, value, Origin{Layer: LayerFile, File: path, Line: line})
	}
	return warnings
}

// parseYAML reads config.yaml: standard YAML whose nested maps are flattened
// with '.'; duplicated keys are errors; null values leave the key unset.
func parseYAML(data []byte, path string, c *Configuration) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("Failed to parse YAML configuration file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("Failed to parse YAML configuration file %s:%d: the top level must be a map of keys to values", path, root.Line)
	}
	seen := map[string]int{}
	return flatten(root, "", path, c, seen)
}

func flatten(n *yaml.Node, prefix, path string, c *Configuration, seen map[string]int) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		key := k.Value
		if prefix != "" {
			key = prefix + "." + key
		}
		if v.Kind == yaml.MappingNode {
			if err := flatten(v, key, path, c, seen); err != nil {
				return err
			}
			continue
		}
		if line, dup := seen[key]; dup {
			return fmt.Errorf("Failed to parse YAML configuration file %s:%d: key '%s' is already defined at line %d", path, k.Line, key, line)
		}
		seen[key] = k.Line
		var value string
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				continue
			}
			value = v.Value
		case yaml.SequenceNode:
			items := make([]string, len(v.Content))
			for j, it := range v.Content {
				items[j] = it.Value
			}
			value = "[" + strings.Join(items, ", ") + "]"
		default:
			return fmt.Errorf("Failed to parse YAML configuration file %s:%d: unsupported value for key '%s'", path, v.Line, key)
		}
		c.Set(key, value, Origin{Layer: LayerFile, File: path, Line: k.Line})
	}
	return nil
}

// ParseDynamicProperty splits a -D argument at its first '='; a bare key
// means "true", as in Flink (-Dflag).
func ParseDynamicProperty(arg string) (key, value string, err error) {
	key, value, found := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if key == "" {
		return "", "", fmt.Errorf("Invalid dynamic property '-D%s': expected -D<key>=<value> or -D<key>", arg)
	}
	if !found {
		return key, "true", nil
	}
	return key, value, nil
}
