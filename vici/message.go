package vici

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Element types of a message (README.md, "Message format").
const (
	elemSectionStart = 1
	elemSectionEnd   = 2
	elemKeyValue     = 3
	elemListStart    = 4
	elemListItem     = 5
	elemListEnd      = 6
)

// Limits of a message. A name has an 8-bit length and a value a 16-bit
// one (the wire says so); MaxDepth is ours: strongSwan nests sections at
// most four deep (a connection's children's sections in load-conn), and
// a decoder that recursed as deep as a 512 KiB message could nest would
// let a client hold the daemon's stack.
const (
	MaxNameLen  = 255
	MaxValueLen = 65535
	MaxDepth    = 16
)

// ErrMalformed is the error of a message or packet that breaks the
// protocol's rules; the error wrapping it says which rule and where.
var ErrMalformed = errors.New("vici: malformed")

// Message is one vici message: a section (the root's is unnamed) of
// key/values, lists and sub-sections, in the order they were set. Keys
// are unique within a section. Values are strings: the protocol's are
// blobs, and strongSwan sends text only; numbers are written in decimal.
// The zero value is an empty message; not safe for concurrent use.
type Message struct {
	keys []string
	// vals holds, in the order of keys, a string, a []string (a list) or
	// a *Message (a section).
	vals []any
	// index finds a key's place once a section has more than
	// indexFrom keys; smaller ones (nearly all: an SA has about 25)
	// are searched in order, which costs less than a map's allocation.
	index map[string]int
}

// indexFrom is the number of keys past which a section gets an index.
const indexFrom = 32

// NewMessage returns an empty message.
func NewMessage() *Message { return &Message{} }

// find returns key's place, or -1.
func (m *Message) find(key string) int {
	if m.index != nil {
		if i, ok := m.index[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range m.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// Set sets key to v: a string, a []string (a list; nil writes an empty
// one) or a *Message (a section). A key set again keeps its place and
// takes the new value. It returns m, for chaining.
func (m *Message) Set(key string, v any) *Message {
	switch v.(type) {
	case string, []string, *Message:
	default:
		panic(fmt.Sprintf("vici: Set(%q): value of type %T; want string, []string or *Message", key, v))
	}
	if i := m.find(key); i >= 0 {
		m.vals[i] = v
		return m
	}
	m.keys = append(m.keys, key)
	m.vals = append(m.vals, v)
	switch {
	case m.index != nil:
		m.index[key] = len(m.keys) - 1
	case len(m.keys) > indexFrom:
		m.index = make(map[string]int, 2*len(m.keys))
		for i, k := range m.keys {
			m.index[k] = i
		}
	}
	return m
}

// Keys returns the keys in the order they were set. The slice is m's.
func (m *Message) Keys() []string { return m.keys }

// Len returns how many keys m has.
func (m *Message) Len() int { return len(m.keys) }

// Get returns key's value (string, []string or *Message), or nil.
func (m *Message) Get(key string) any {
	if i := m.find(key); i >= 0 {
		return m.vals[i]
	}
	return nil
}

// String returns key's value if it is a key/value, else "".
func (m *Message) String(key string) string {
	s, _ := m.Get(key).(string)
	return s
}

// List returns key's value if it is a list, else nil.
func (m *Message) List(key string) []string {
	l, _ := m.Get(key).([]string)
	return l
}

// Section returns key's value if it is a section, else nil.
func (m *Message) Section(key string) *Message {
	s, _ := m.Get(key).(*Message)
	return s
}

// AppendBinary appends m's encoding to b. It fails on a name longer
// than MaxNameLen, a value longer than MaxValueLen or sections nested
// deeper than MaxDepth.
func (m *Message) AppendBinary(b []byte) ([]byte, error) {
	return m.appendSection(b, 0)
}

func (m *Message) appendSection(b []byte, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return b, fmt.Errorf("vici: sections nested deeper than %d", MaxDepth)
	}
	var err error
	for i, k := range m.keys {
		switch v := m.vals[i].(type) {
		case string:
			if b, err = appendName(b, elemKeyValue, k); err != nil {
				return b, err
			}
			if b, err = appendValue(b, k, v); err != nil {
				return b, err
			}
		case []string:
			if b, err = appendName(b, elemListStart, k); err != nil {
				return b, err
			}
			for _, item := range v {
				b = append(b, elemListItem)
				if b, err = appendValue(b, k, item); err != nil {
					return b, err
				}
			}
			b = append(b, elemListEnd)
		case *Message:
			if b, err = appendName(b, elemSectionStart, k); err != nil {
				return b, err
			}
			if b, err = v.appendSection(b, depth+1); err != nil {
				return b, err
			}
			b = append(b, elemSectionEnd)
		}
	}
	return b, nil
}

func appendName(b []byte, typ byte, name string) ([]byte, error) {
	if len(name) > MaxNameLen {
		return b, fmt.Errorf("vici: name %.20q... is %d bytes long; at most %d", name, len(name), MaxNameLen)
	}
	b = append(b, typ, byte(len(name)))
	return append(b, name...), nil
}

func appendValue(b []byte, key, v string) ([]byte, error) {
	if len(v) > MaxValueLen {
		return b, fmt.Errorf("vici: value of %q is %d bytes long; at most %d", key, len(v), MaxValueLen)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...), nil
}

// ParseMessage decodes a message. It fails, with an error wrapping
// ErrMalformed that names the offset, on a truncated element, an unknown
// element type, a key/value or section inside a list, a list inside a
// list, an unbalanced section or list end, a key set twice in one
// section, or sections nested deeper than MaxDepth. The message does not
// alias b.
func ParseMessage(b []byte) (*Message, error) {
	p := parser{b: b}
	root := &Message{}
	stack := []*Message{root}
	var list []string // the open list's items
	var listName string
	inList := false
	for p.off < len(b) {
		at := p.off
		typ := b[p.off]
		p.off++
		cur := stack[len(stack)-1]
		if inList && typ != elemListItem && typ != elemListEnd {
			return nil, p.errorf(at, "element type %d inside list %q", typ, listName)
		}
		switch typ {
		case elemSectionStart:
			name, err := p.name()
			if err != nil {
				return nil, err
			}
			if len(stack) > MaxDepth {
				return nil, p.errorf(at, "sections nested deeper than %d", MaxDepth)
			}
			if err := p.setNew(at, cur, name); err != nil {
				return nil, err
			}
			sub := &Message{}
			cur.Set(name, sub)
			stack = append(stack, sub)
		case elemSectionEnd:
			if len(stack) == 1 {
				return nil, p.errorf(at, "section end without a section")
			}
			stack = stack[:len(stack)-1]
		case elemKeyValue:
			name, err := p.name()
			if err != nil {
				return nil, err
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if err := p.setNew(at, cur, name); err != nil {
				return nil, err
			}
			cur.Set(name, v)
		case elemListStart:
			name, err := p.name()
			if err != nil {
				return nil, err
			}
			if err := p.setNew(at, cur, name); err != nil {
				return nil, err
			}
			inList, listName, list = true, name, []string{}
		case elemListItem:
			if !inList {
				return nil, p.errorf(at, "list item outside a list")
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		case elemListEnd:
			if !inList {
				return nil, p.errorf(at, "list end without a list")
			}
			cur.Set(listName, list)
			inList, list = false, nil
		default:
			return nil, p.errorf(at, "unknown element type %d", typ)
		}
	}
	if inList {
		return nil, p.errorf(len(b), "list %q not ended", listName)
	}
	if len(stack) > 1 {
		return nil, p.errorf(len(b), "%d sections not ended", len(stack)-1)
	}
	return root, nil
}

// parser reads a message's elements.
type parser struct {
	b   []byte
	off int
}

func (p *parser) errorf(at int, format string, args ...any) error {
	return fmt.Errorf("%w message at byte %d: %s", ErrMalformed, at, fmt.Sprintf(format, args...))
}

// name reads an 8-bit length and that many bytes.
func (p *parser) name() (string, error) {
	if p.off >= len(p.b) {
		return "", p.errorf(p.off, "name's length missing")
	}
	n := int(p.b[p.off])
	if p.off+1+n > len(p.b) {
		return "", p.errorf(p.off, "name of %d bytes, %d left", n, len(p.b)-p.off-1)
	}
	s := string(p.b[p.off+1 : p.off+1+n])
	p.off += 1 + n
	return s, nil
}

// value reads a 16-bit length and that many bytes.
func (p *parser) value() (string, error) {
	if p.off+2 > len(p.b) {
		return "", p.errorf(p.off, "value's length missing")
	}
	n := int(binary.BigEndian.Uint16(p.b[p.off:]))
	if p.off+2+n > len(p.b) {
		return "", p.errorf(p.off, "value of %d bytes, %d left", n, len(p.b)-p.off-2)
	}
	s := string(p.b[p.off+2 : p.off+2+n])
	p.off += 2 + n
	return s, nil
}

// setNew refuses a key the section already has.
func (p *parser) setNew(at int, m *Message, name string) error {
	if m.find(name) >= 0 {
		return p.errorf(at, "key %q twice in one section", name)
	}
	return nil
}
