package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/daemon"
)

// cmdRun is `ipsecd run --config FILE`: see runDaemon.
func cmdRun(args []string, _, stderr io.Writer) error {
	fs := newFlags("run", "run --config FILE", stderr)
	path := fs.String("config", "", "config `FILE` (YAML)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usagef("--config FILE is required")
	}
	return exitCode(runDaemon(*path))
}

// runDaemon is `ipsecd run --config FILE`: it brings the file up (package
// daemon: interfaces, underlay, IKE, control socket, metrics), then
// forwards until SIGTERM or SIGINT (exit 0, interfaces removed). SIGHUP reloads FILE; a bad file is
// refused and the running config stays. The config's warnings (key files
// others can read) are logged at start and after each applied reload; the
// keys are zeroed when they are no longer used (sa/retire.go).
func runDaemon(path string) int {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := logrus.New()
	if err := daemon.ConfigureLog(log, cfg.Log); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// Signals are caught before start-up so that a SIGTERM during it
	// still removes what was made.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	raiseCapabilities(log)           // caps_unsafe_linux.go: file capabilities of a non-root run
	d, err := daemon.Start(cfg, log) // it logs the file's warnings first
	if err != nil {
		msg := "start-up failed"
		if hint := capabilityHint(err, cfg.Underlay.RawESP); hint != "" {
			msg += ": " + hint
		}
		log.WithError(err).Error(msg)
		cfg.WipeKeys()
		return 1
	}
	log.WithField("config", path).Info("running: " + cfg.Summary())
	releaseMemory()
	for sig := range sigs {
		switch sig {
		case syscall.SIGHUP:
			d.Reload(path) // it logs what changed, or why not
			releaseMemory()
		default:
			log.WithField("signal", sig.String()).Info("stopping")
			if err := d.Stop(); err != nil { // it zeroes the keys too
				log.WithError(err).Warn("stopping")
			}
			return 0
		}
	}
	return 0
}

// releaseMemory gives the operating system back the memory that start-up
// or a reload used and no longer needs. Parsing a config of 10,000 SAs
// (5.7 MB of YAML) builds a node tree of some 150 MB that is garbage once
// the SAs are made; Go's runtime would return those pages only slowly
// (its scavenger), so the daemon kept about 100 MiB of RSS more than its
// heap for minutes after start-up (docs/design.md, "Many interfaces").
func releaseMemory() { debug.FreeOSMemory() }
