package daemon

import (
	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
)

// ConfigureLog applies the config's log section to log: its level and
// format. Start leaves log as it is given; a reload applies the new
// file's section.
func ConfigureLog(log *logrus.Logger, c config.Log) error {
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
