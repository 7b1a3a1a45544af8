package sa

import "fmt"

// The text forms of Dir, Mode and Action are the names ip xfrm and the
// config file use; these are the only tables of them. The front ends
// (config, control, the CLI) parse through them.

// ParseDir returns the direction named "in" or "out".
func ParseDir(s string) (Dir, bool) {
	switch s {
	case "in":
		return DirIn, true
	case "out":
		return DirOut, true
	}
	return 0, false
}

// ParseMode returns the mode named "tunnel" or "transport".
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "tunnel":
		return ModeTunnel, true
	case "transport":
		return ModeTransport, true
	}
	return 0, false
}

// ParseAction returns the action named "allow" or "block".
func ParseAction(s string) (Action, bool) {
	switch s {
	case "allow":
		return ActionAllow, true
	case "block":
		return ActionBlock, true
	}
	return 0, false
}

// MarshalText returns "in" or "out"; the zero Dir is an error.
func (d Dir) MarshalText() ([]byte, error) {
	if _, ok := ParseDir(d.String()); !ok {
		return nil, fmt.Errorf("%w: dir: %d is neither in nor out", ErrInvalidConfig, uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText takes "in" or "out".
func (d *Dir) UnmarshalText(b []byte) error {
	v, ok := ParseDir(string(b))
	if !ok {
		return fmt.Errorf("%w: dir: %q: want in or out", ErrInvalidConfig, b)
	}
	*d = v
	return nil
}

// MarshalText returns "tunnel" or "transport"; the zero Mode is an error.
func (m Mode) MarshalText() ([]byte, error) {
	if _, ok := ParseMode(m.String()); !ok {
		return nil, fmt.Errorf("%w: mode: %d is neither tunnel nor transport", ErrInvalidConfig, uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText takes "tunnel" or "transport".
func (m *Mode) UnmarshalText(b []byte) error {
	v, ok := ParseMode(string(b))
	if !ok {
		return fmt.Errorf("%w: mode: %q: want tunnel or transport", ErrInvalidConfig, b)
	}
	*m = v
	return nil
}

// MarshalText returns "allow" or "block"; the zero Action is an error.
func (a Action) MarshalText() ([]byte, error) {
	if _, ok := ParseAction(a.String()); !ok {
		return nil, fmt.Errorf("%w: action: %d is neither allow nor block", ErrInvalidConfig, uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText takes "allow" or "block".
func (a *Action) UnmarshalText(b []byte) error {
	v, ok := ParseAction(string(b))
	if !ok {
		return fmt.Errorf("%w: action: %q: want allow or block", ErrInvalidConfig, b)
	}
	*a = v
	return nil
}
