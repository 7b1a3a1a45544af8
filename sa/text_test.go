package sa

import (
	"encoding"
	"errors"
	"testing"
)

// TestText: Dir, Mode and Action round-trip through their names, and a
// wrong name or a zero value is an ErrInvalidConfig naming the field.
func TestText(t *testing.T) {
	for _, tt := range []struct {
		v interface {
			encoding.TextMarshaler
		}
		p    encoding.TextUnmarshaler
		name string
	}{
		{DirIn, new(Dir), "in"}, {DirOut, new(Dir), "out"},
		{ModeTunnel, new(Mode), "tunnel"}, {ModeTransport, new(Mode), "transport"},
		{ActionAllow, new(Action), "allow"}, {ActionBlock, new(Action), "block"},
	} {
		b, err := tt.v.MarshalText()
		if err != nil || string(b) != tt.name {
			t.Errorf("%v.MarshalText() = %q, %v; want %q", tt.v, b, err, tt.name)
		}
		if err := tt.p.UnmarshalText([]byte(tt.name)); err != nil {
			t.Errorf("UnmarshalText(%q): %v", tt.name, err)
		}
		if err := tt.p.UnmarshalText([]byte("IN")); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("UnmarshalText(IN) into %T: %v, want ErrInvalidConfig", tt.p, err)
		}
	}
	for _, z := range []encoding.TextMarshaler{Dir(0), Mode(0), Action(0)} {
		if _, err := z.MarshalText(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("zero %T: %v, want ErrInvalidConfig", z, err)
		}
	}
}
