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
// refused and the running config stays.
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

	n, err := startNode(cfg, log)
	if err != nil {
		log.WithError(err).Error("start-up failed")
		return 1
	}
	log.WithField("config", *path).Info("running: " + cfg.Summary())
	for sig := range sigs {
		switch sig {
		case syscall.SIGHUP:
			n.reload(*path)
		default:
			log.WithField("signal", sig.String()).Info("stopping")
			if err := n.stop(); err != nil {
				log.WithError(err).Warn("stopping")
			}
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
