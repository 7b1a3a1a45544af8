package vici

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// readmeExample is the encoding example of strongSwan's vici README.
var readmeExample = []byte{
	3, 4, 'k', 'e', 'y', '1', 0, 6, 'v', 'a', 'l', 'u', 'e', '1',
	1, 8, 's', 'e', 'c', 't', 'i', 'o', 'n', '1',
	1, 11, 's', 'u', 'b', '-', 's', 'e', 'c', 't', 'i', 'o', 'n',
	3, 4, 'k', 'e', 'y', '2', 0, 6, 'v', 'a', 'l', 'u', 'e', '2',
	2,
	4, 5, 'l', 'i', 's', 't', '1',
	5, 0, 5, 'i', 't', 'e', 'm', '1',
	5, 0, 5, 'i', 't', 'e', 'm', '2',
	6,
	2,
}

func TestReadmeExample(t *testing.T) {
	m := NewMessage().Set("key1", "value1").
		Set("section1", NewMessage().
			Set("sub-section", NewMessage().Set("key2", "value2")).
			Set("list1", []string{"item1", "item2"}))
	got, err := m.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, readmeExample) {
		t.Fatalf("encoded\n%v\nwant\n%v", got, readmeExample)
	}
	back, err := ParseMessage(readmeExample)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Section("section1").Section("sub-section").String("key2"); got != "value2" {
		t.Errorf("section1.sub-section.key2 = %q, want value2", got)
	}
	if got := back.Section("section1").List("list1"); len(got) != 2 || got[1] != "item2" {
		t.Errorf("section1.list1 = %q, want [item1 item2]", got)
	}
	if got := strings.Join(back.Keys(), ","); got != "key1,section1" {
		t.Errorf("keys %s, want key1,section1 (in order)", got)
	}
}

func TestParseMessageRefuses(t *testing.T) {
	deep := bytes.Repeat([]byte{1, 1, 'a'}, MaxDepth+1)
	deep = append(deep, bytes.Repeat([]byte{2}, MaxDepth+1)...)
	for _, tt := range []struct {
		name, want string
		in         []byte
	}{
		{"unknown element", "unknown element type 9", []byte{9}},
		{"name truncated", "name of 4 bytes", []byte{3, 4, 'k', 'e'}},
		{"value length missing", "value's length missing", []byte{3, 1, 'k', 0}},
		{"value truncated", "value of 6 bytes", []byte{3, 1, 'k', 0, 6, 'v'}},
		{"section not ended", "1 sections not ended", []byte{1, 1, 's'}},
		{"stray section end", "section end without a section", []byte{2}},
		{"list not ended", `list "l" not ended`, []byte{4, 1, 'l'}},
		{"item outside list", "list item outside a list", []byte{5, 0, 0}},
		{"stray list end", "list end without a list", []byte{6}},
		{"key/value in a list", `element type 3 inside list "l"`, []byte{4, 1, 'l', 3, 1, 'k', 0, 0}},
		{"list in a list", `element type 4 inside list "l"`, []byte{4, 1, 'l', 4, 1, 'm'}},
		{"duplicate key", `key "k" twice`, []byte{3, 1, 'k', 0, 0, 4, 1, 'k', 6}},
		{"too deep", "nested deeper than 16", deep},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMessage(tt.in)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an ErrMalformed saying %q", err, tt.want)
			}
		})
	}
}

func TestMaxDepthAccepted(t *testing.T) {
	in := bytes.Repeat([]byte{1, 1, 'a'}, MaxDepth)
	in = append(in, bytes.Repeat([]byte{2}, MaxDepth)...)
	m, err := ParseMessage(in)
	if err != nil {
		t.Fatalf("%d sections deep: %v", MaxDepth, err)
	}
	if _, err := m.AppendBinary(nil); err != nil {
		t.Fatalf("re-encoding %d sections deep: %v", MaxDepth, err)
	}
	deeper := NewMessage().Set("a", m)
	if _, err := deeper.AppendBinary(nil); err == nil {
		t.Fatalf("encoded %d sections deep, want an error", MaxDepth+1)
	}
}

func TestEncodeRefusesLongNamesAndValues(t *testing.T) {
	if _, err := NewMessage().Set(strings.Repeat("k", 256), "v").AppendBinary(nil); err == nil {
		t.Error("a 256-byte key was encoded")
	}
	if _, err := NewMessage().Set("k", strings.Repeat("v", 65536)).AppendBinary(nil); err == nil {
		t.Error("a 65536-byte value was encoded")
	}
	if _, err := NewMessage().Set("k", []string{strings.Repeat("v", 65536)}).AppendBinary(nil); err == nil {
		t.Error("a 65536-byte list item was encoded")
	}
}

func TestPackets(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    Packet
		want []byte
	}{
		{"request", Packet{Type: CmdRequest, Name: "version", Message: NewMessage()}, append([]byte{0, 7}, "version"...)},
		{"register", Packet{Type: EventRegister, Name: "list-sa"}, append([]byte{3, 7}, "list-sa"...)},
		{"confirm", Packet{Type: EventConfirm}, []byte{5}},
		{"unknown", Packet{Type: CmdUnknown}, []byte{2}},
		{"response", Packet{Type: CmdResponse, Message: NewMessage().Set("success", "yes")},
			append([]byte{1, 3, 7}, "success\x00\x03yes"...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			back, err := ParsePacket(got)
			if err != nil {
				t.Fatal(err)
			}
			if back.Type != tt.p.Type || back.Name != tt.p.Name {
				t.Fatalf("parsed %v %q, want %v %q", back.Type, back.Name, tt.p.Type, tt.p.Name)
			}
		})
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty segment"},
		{"unknown type", []byte{8}, "unknown type 8"},
		{"name truncated", []byte{0, 5, 'a'}, "name of 5 bytes truncated"},
		// 1+255 wraps in a byte: a name of 255 bytes must not read as
		// one of none.
		{"name of 255 truncated", append([]byte{0, 255}, bytes.Repeat([]byte{'a'}, 100)...), "name of 255 bytes truncated"},
		{"name missing", []byte{3}, "name missing"},
		{"empty name", []byte{3, 0}, "empty name"},
		{"trailing bytes", []byte{5, 1}, "1 bytes after EVENT_CONFIRM"},
		{"bad message", []byte{0, 1, 'a', 9}, "unknown element type 9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePacket(tt.in)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an ErrMalformed saying %q", err, tt.want)
			}
		})
	}
}

func TestSegments(t *testing.T) {
	seg, err := EncodeSegment(&Packet{Type: EventConfirm})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(seg, []byte{0, 0, 0, 1, 5}) {
		t.Fatalf("segment %v, want [0 0 0 1 5]", seg)
	}
	got, err := ReadSegment(bytes.NewReader(seg), nil)
	if err != nil || !bytes.Equal(got, []byte{5}) {
		t.Fatalf("read %v, %v; want [5]", got, err)
	}
	// A length past 512 KiB is refused before its data is read.
	if _, err := ReadSegment(bytes.NewReader([]byte{0, 8, 0, 1}), nil); !errors.Is(err, ErrTooLong) {
		t.Fatalf("a 524289-byte segment: %v, want ErrTooLong", err)
	}
	if _, err := ReadSegment(bytes.NewReader([]byte{0, 8, 0, 0}), nil); err == nil || errors.Is(err, ErrTooLong) {
		t.Fatalf("a 524288-byte segment (truncated): %v, want a short read", err)
	}
	big := NewMessage()
	for i := range 9 {
		big.Set(strings.Repeat("k", i+1), strings.Repeat("v", 65535))
	}
	if _, err := EncodeSegment(&Packet{Type: CmdResponse, Message: big}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("a 590 KB response: %v, want ErrTooLong", err)
	}
}

// A section of more keys than indexFrom finds them by its index: set
// again, a key keeps its place; a parsed one refuses a key twice.
func TestLargeSection(t *testing.T) {
	m := NewMessage()
	for i := range 40 {
		m.Set(strconv.Itoa(i), strconv.Itoa(i))
	}
	m.Set("7", "seven")
	if m.Len() != 40 || m.String("7") != "seven" || m.String("39") != "39" || m.Get("40") != nil || m.Keys()[7] != "7" {
		t.Fatalf("len %d, 7=%q, 39=%q, keys[7]=%q", m.Len(), m.String("7"), m.String("39"), m.Keys()[7])
	}
	enc, err := m.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseMessage(enc)
	if err != nil || back.String("7") != "seven" || back.Len() != 40 {
		t.Fatalf("parsed back: %v, 7=%q, len %d", err, back.String("7"), back.Len())
	}
	dup := append(enc, 3, 2, '3', '9', 0, 0) // 39 again
	if _, err := ParseMessage(dup); err == nil || !strings.Contains(err.Error(), `key "39" twice`) {
		t.Fatalf("a key twice in a large section: %v", err)
	}
}
