package config

import "github.com/ipsecd/ipsecd/internal/keytext"

// MaxConfigFile is the largest config file Load reads: far more than
// thousands of states take, and little enough memory that a config naming
// a huge file or a device cannot exhaust it.
const MaxConfigFile = 16 << 20

// The files that hold keys (the config file, key_file, secret_file) are
// read and judged by keytext, the one reader of keys that the command line
// shares; these short names are the decoders'.
const maxKeyFile = keytext.MaxFile

var (
	readRegular = keytext.ReadRegular
	exposedKeys = keytext.Exposure
)
