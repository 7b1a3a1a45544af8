// Package promtest reads a Prometheus text-format scrape for tests: the
// daemon's unit tests and the namespace tests check the same series.
package promtest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples parses a scrape with the parser Prometheus uses into its
// series, keyed as Series spells them, and the metric families. It fails
// the test on a parse error or a series given twice.
func Samples(t testing.TB, body string) (map[string]float64, map[string]*dto.MetricFamily) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, body)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			key := key(name, m.GetLabel())
			if _, dup := out[key]; dup {
				t.Errorf("series %s given twice", key)
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Untyped != nil:
				out[key] = m.Untyped.GetValue()
			}
		}
	}
	return out, fams
}

// Series spells a series as Samples keys it, `name{a="x",b="y"}` with the
// labels sorted, from alternating label names and values.
func Series(name string, kv ...string) string {
	var labels []*dto.LabelPair
	for i := 0; i+1 < len(kv); i += 2 {
		labels = append(labels, &dto.LabelPair{Name: &kv[i], Value: &kv[i+1]})
	}
	return key(name, labels)
}

func key(name string, labels []*dto.LabelPair) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}
