package control

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The read-only counters: stats (the global xfrm counters) and
// interface.list (each interface with its counters).

func (s *Server) stats(*Request) (any, error) { return Counters(s.backend.Stats()), nil }

func (s *Server) interfaceList(*Request) (any, error) { return nonNil(s.backend.Interfaces()), nil }

// Counters are the global counters in /proc/net/xfrm_stat order. In
// JSON they are one object keyed by counter name, in that order:
// {"XfrmInError": 0, "XfrmInBufferError": 0, ...}, so that a script reads
// one counter as .XfrmInNoStates rather than searching a list.
type Counters []Counter

// MarshalJSON writes the counters as one object, in order.
func (cs Counters) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(c.Name)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s:%d", name, c.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON wrote, keeping the order.
func (cs *Counters) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("counters: want a JSON object")
	}
	out := Counters{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var v uint64
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("counters: %s: %w", name, err)
		}
		out = append(out, Counter{Name: name, Value: v})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*cs = out
	return nil
}

// nonNil makes an empty list marshal as [] rather than null.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
