package hscost

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Row is the median over rounds of one responder's samples for one
// proposal.
type Row struct {
	Proposal, Responder string
	Rounds              int
	CPUPerSA, Median    time.Duration
}

// Medians groups samples by proposal and responder, in the order they
// first appear, and takes the median of each group's CPU per IKE SA and
// of its median handshake time (each on its own).
func Medians(samples []Sample) []Row {
	var rows []Row
	groups := map[[2]string][]Sample{}
	for _, s := range samples {
		k := [2]string{s.Proposal, s.Responder}
		if groups[k] == nil {
			rows = append(rows, Row{Proposal: s.Proposal, Responder: s.Responder})
		}
		groups[k] = append(groups[k], s)
	}
	for i, r := range rows {
		g := groups[[2]string{r.Proposal, r.Responder}]
		var cpu, hs []time.Duration
		for _, s := range g {
			cpu, hs = append(cpu, s.CPUPerSA), append(hs, s.Median)
		}
		rows[i].Rounds, rows[i].CPUPerSA, rows[i].Median = len(g), median(cpu), median(hs)
	}
	return rows
}

// median of d, the lower middle one of an even count.
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[(len(d)-1)/2]
}

// Table is the markdown table of rows: each proposal's ipsecd row with
// the ratios ipsecd/charon of its figures to charon's row.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| IKE proposal | responder | rounds | CPU per IKE SA (ms) | handshake (ms) | CPU ratio ipsecd/charon | handshake ratio ipsecd/charon |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		cpuRatio, hsRatio := "–", "–"
		if r.Responder == "ipsecd" {
			for _, c := range rows {
				if c.Proposal == r.Proposal && c.Responder == "charon" && c.CPUPerSA > 0 && c.Median > 0 {
					cpuRatio = fmt.Sprintf("%.2f", float64(r.CPUPerSA)/float64(c.CPUPerSA))
					hsRatio = fmt.Sprintf("%.2f", float64(r.Median)/float64(c.Median))
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %s | %s |\n", r.Proposal, r.Responder, r.Rounds,
			ms(r.CPUPerSA), ms(r.Median), cpuRatio, hsRatio)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
