package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
)

// runDaemon is `ipsecd run --config FILE`: it brings up the interfaces,
// the underlay and the control socket, then forwards until SIGTERM or
// SIGINT (exit 0, interfaces removed). SIGHUP reloads FILE; a bad file is
// refused and the running config stays. The config's warnings (key files
// others can read) are logged at start and after each applied reload; the
// keys are zeroed when they are no longer used (sa/retire.go).
func runDaemon(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "", "config `FILE` (YAML)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: ipsecd run --config FILE")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := logrus.New()
	if err := configureLog(log, cfg.Log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// Signals are caught before start-up so that a SIGTERM during it
	// still removes what was made.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	raiseCapabilities(log) // caps_unsafe_linux.go: file capabilities of a non-root run
	logConfigWarnings(log.WithField("config", *path), cfg)
	n, err := startNode(cfg, log)
	if err != nil {
		log.WithError(err).Error("start-up failed")
		cfg.WipeKeys()
		return 1
	}
	log.WithField("config", *path).Info("running: " + cfg.Summary())
	for sig := range sigs {
		switch sig {
		case syscall.SIGHUP:
			old := n.runningConfig()
			n.reload(*path)
			if now := n.runningConfig(); now != old {
				// Applied: the old file's keys are no longer needed
				// (the SAs hold copies of their own).
				logConfigWarnings(log.WithField("config", *path), now)
				old.WipeKeys()
			}
		default:
			log.WithField("signal", sig.String()).Info("stopping")
			if err := n.stop(); err != nil {
				log.WithError(err).Warn("stopping")
			}
			n.wipeKeys()
			return 0
		}
	}
	return 0
}

// configureLog applies the config's log section.
func configureLog(log *logrus.Logger, c config.Log) error {
	level, err := logrus.ParseLevel(c.Level)
	if err != nil {
		return err
	}
	log.SetLevel(level)
	switch c.Format {
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	default:
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
	return nil
}

// logConfigWarnings logs what the config file's check found short of an
// error (key files readable by others, for one).
func logConfigWarnings(log logrus.FieldLogger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
}
