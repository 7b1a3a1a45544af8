package config

import "testing"

// FuzzParse feeds Parse arbitrary bytes: it must never panic, and must
// return exactly one of a Config and an error.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(""))
	f.Add([]byte("states: [{spi: 0x1, aead: {key_file: /dev/null}}]"))
	f.Add([]byte("interfaces: &a [*a]"))
	f.Add([]byte("a: &a [*a, *a]\nb: *a\n"))
	f.Add([]byte("ike: {block_threshold: 5, init_limit_half_open: 0, max_children: 2, max_ike_sas_per_peer: 3}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v", c != nil, err)
		}
	})
}
