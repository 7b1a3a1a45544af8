package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestPprof: the profiler is off unless the file says pprof: true, and
// pprof: true needs a metrics listener to be served on.
func TestPprof(t *testing.T) {
	for _, tt := range []struct {
		name string
		text string
		want bool
		errs []string
	}{
		{"default", "metrics: 127.0.0.1:9578\n", false, nil},
		{"off", "metrics: 127.0.0.1:9578\npprof: false\n", false, nil},
		{"on", "metrics: 127.0.0.1:9578\npprof: true\n", true, nil},
		{"on without metrics", "log: {level: info}\npprof: true\n", false,
			[]string{"f.yaml:2: pprof: true needs metrics: the profiler is served on the metrics listener"}},
		{"on with metrics empty", "metrics: \"\"\npprof: true\n", false,
			[]string{"f.yaml:2: pprof: true needs metrics: the profiler is served on the metrics listener"}},
		{"on with a bad metrics", "metrics: localhost\npprof: true\n", false,
			[]string{`f.yaml:1: metrics: want host:port, got "localhost"`}},
		{"not a bool", "metrics: 127.0.0.1:9578\npprof: yes please\n", false,
			[]string{`f.yaml:2: pprof: want true or false, got "yes please"`}},
		{"typo", "metrics: 127.0.0.1:9578\nprof: true\n", false,
			[]string{"f.yaml:2: prof: unknown field; did you mean pprof?"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("f.yaml", []byte(tt.text))
			if tt.errs != nil {
				var got []string
				if err != nil {
					got = strings.Split(err.Error(), "\n")
				}
				if !reflect.DeepEqual(got, tt.errs) {
					t.Errorf("errors:\n got %q\nwant %q", got, tt.errs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Pprof != tt.want {
				t.Errorf("Pprof = %v, want %v", c.Pprof, tt.want)
			}
			if got := strings.Contains(c.String(), "pprof: true"); got != tt.want {
				t.Errorf("String() shows pprof: %v, want %v:\n%s", got, tt.want, c.String())
			}
		})
	}
}
