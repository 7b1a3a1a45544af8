package hint

import "testing"

func TestOrList(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"}} {
		if got := OrList(tt.in); got != tt.want {
			t.Errorf("OrList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := OrList([]int{64, 96, 128}); got != "64, 96 or 128" {
		t.Errorf("OrList(ints) = %q", got)
	}
}

func TestClosest(t *testing.T) {
	known := []string{"soft_add_seconds", "replay_window", "mark", "rfc4106(gcm(aes))"}
	for name, want := range map[string]string{
		"mrak":             "mark",
		"replay-window":    "replay_window",
		"soft_add":         "soft_add_seconds",
		"rfc4106(gcm(aes)": "rfc4106(gcm(aes))",
		"transport":        "",
		"cbc(aes)":         "",
	} {
		if got := Closest(name, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
}
