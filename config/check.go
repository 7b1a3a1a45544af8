package config

import "github.com/ipsecd/ipsecd/sa"

// The rules of one state or policy are sa's (sa.Check, sa.CheckPolicy);
// what is checked here is about the file: if_ids that name its
// interfaces, states and policies given twice, and a key that two states
// share (sa.KeyOwners).

// Limits of a state, as sa has them (the IKE sections take them too).
const (
	MaxReplayWindow     = sa.MaxReplayWindow
	DefaultReplayWindow = sa.DefaultReplayWindow
)
