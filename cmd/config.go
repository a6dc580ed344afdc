package cmd

import (
	"log/slog"

	"github.com/gflink/gflink/engine/config"
)

// loadConfig reads the configuration directory and -D, and reports
// warnings (lines flink-conf.yaml skipped) to the log.
func loadConfig(f *Factory, g *globalOptions, log *slog.Logger) (*config.Configuration, error) {
	for _, d := range g.Dynamic {
		// A -D without a key is a mistake on the command line (exit 2),
		// not in the configuration.
		if _, _, err := config.ParseDynamicProperty(d); err != nil {
			return nil, usageErrorf("%v", err)
		}
	}
	l, err := config.Load(config.Sources{ConfigDir: g.ConfigDir, Getenv: f.Getenv, WorkingDir: f.WorkingDir,
		ExecutableDir: f.ExecutableDir, Dynamic: g.Dynamic})
	if err != nil {
		return nil, err
	}
	for _, w := range l.Warnings {
		log.Warn(w)
	}
	return l.Config, nil
}

// validateConfig checks every honoured option, so that a bad value stops
// the command before anything starts, and warns about deprecated keys and
// about keys that look like typos of honoured ones.
func validateConfig(c *config.Configuration, log *slog.Logger) error {
	if err := config.Validate(c, allOptions()); err != nil {
		return err
	}
	for _, w := range config.DeprecationWarnings(c, allOptions()) {
		log.Warn(w)
	}
	for _, w := range config.Misspellings(c, allOptions()) {
		log.Warn(w)
	}
	return nil
}
