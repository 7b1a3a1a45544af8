package printable

import "testing"

func TestEscape(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"fqdn", "b.example.net", "b.example.net"},
		{"dn", "C=CH, O=Example, CN=b", "C=CH, O=Example, CN=b"},
		{"utf-8 letters", "grüezi.example", "grüezi.example"},
		{"backslash", `a\x1b`, `a\x1b`},
		{"terminal escape and a faked line", "\x1b[2J\r\nfake", `\x1b[2J\x0d\x0afake`},
		{"tab and del", "a\tb\x7f", `a\x09b\x7f`},
		{"not utf-8", "a\xffb", `a\xffb`},
		{"c1 control", "a\u009bb", `a\u009bb`},
		{"bidi override", "a\u202eb", `a\u202eb`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"empty", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Escape(tt.in)
			if got != tt.want {
				t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Escape(got); again != got {
				t.Errorf("escaping twice gives %q, want %q", again, got)
			}
			if IsPrintable(tt.in) != (tt.in == tt.want) {
				t.Errorf("IsPrintable(%q) = %v", tt.in, IsPrintable(tt.in))
			}
		})
	}
}

func TestEscapeAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Escape("b.example.net") }); n != 0 {
		t.Errorf("Escape of printable text: %v allocations, want 0", n)
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("\x1b[2J\r\nfake")
	f.Add("grüezi\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !IsPrintable(e) {
			t.Fatalf("Escape(%q) = %q is not printable", s, e)
		}
		if Escape(e) != e {
			t.Fatalf("Escape is not idempotent on %q", s)
		}
	})
}
