package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Geometry of the chart, in SVG user units (pixels).
const (
	svgTop       = 80  // room for the title, subtitle and the panel titles
	svgBottom    = 50  // room for the bar labels and the axis title
	svgLeft      = 60  // room for the y axis labels
	svgPlotH     = 260 // height of the bars' area
	svgBarW      = 44
	svgBarGap    = 22
	svgPanelGap  = 40
	svgPanelPad  = 16 // space inside a panel before the first bar
	svgFontSize  = 12
	svgTitleSize = 15
)

// svg draws the sweeps as bar charts side by side, one panel per sweep,
// on a shared Gbit/s axis: each bar is one ipsecd run, labelled with its
// throughput.
func (r *report) svg() string {
	maxV := 0.0
	for _, s := range r.sweeps {
		for _, p := range s.points {
			if p.row.err == nil {
				maxV = math.Max(maxV, p.row.m.gbps())
			}
		}
	}
	step := niceStep(maxV / 5)
	top := step * math.Ceil(maxV*1.1/step)
	if top == 0 {
		top = 1
	}
	y := func(v float64) float64 { return svgTop + svgPlotH*(1-v/top) }

	widths := make([]int, len(r.sweeps))
	width := svgLeft
	for i, s := range r.sweeps {
		widths[i] = 2*svgPanelPad + len(s.points)*svgBarW + (len(s.points)-1)*svgBarGap
		width += widths[i] + svgPanelGap
	}
	width = max(width, 560) // room for the subtitle
	height := svgTop + svgPlotH + svgBottom

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="%d">`+"\n",
		width, height, width, height, svgFontSize)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="%d" font-weight="bold">ipsecd AES-GCM-128 sweeps: TCP throughput</text>`+"\n", svgLeft, svgTitleSize)
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">iperf3, %v per bar (median of %d), %s</text>`+"\n",
		svgLeft, r.o.duration, r.o.repeat, html.EscapeString(r.env[0][1]))

	// The y axis: grid lines across all panels, labels on the left.
	for v := 0.0; v <= top+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", svgLeft, width-svgPanelGap, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", svgLeft-6, y(v), trimFloat(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">Gbit/s</text>`+"\n", svgTop+svgPlotH/2)

	colors := []string{"#3b6fb6", "#d9822b", "#3a9a5b"}
	x0 := svgLeft
	for i, s := range r.sweeps {
		color := colors[i%len(colors)]
		cx := x0 + widths[i]/2
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", cx, svgTop-14, html.EscapeString(panelTitle(s)))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>`+"\n", x0, x0+widths[i], svgTop+svgPlotH, svgTop+svgPlotH)
		for j, p := range s.points {
			bx := x0 + svgPanelPad + j*(svgBarW+svgBarGap)
			mid := bx + svgBarW/2
			if p.row.err != nil {
				fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#c00">failed</text>`+"\n", mid, svgTop+svgPlotH-8)
			} else {
				v := p.row.m.gbps()
				fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s: %.3f Gbit/s</title></rect>`+"\n",
					bx, y(v), svgBarW, svgTop+svgPlotH-y(v), color, html.EscapeString(p.row.name), v)
				fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle">%.2f</text>`+"\n", mid, y(v)-5, v)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", mid, svgTop+svgPlotH+18, html.EscapeString(p.label))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", cx, svgTop+svgPlotH+38, html.EscapeString(s.unit))
		x0 += widths[i] + svgPanelGap
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// panelTitle is a short title for a sweep's panel.
func panelTitle(s *sweep) string {
	streams := 0
	if len(s.points) != 0 {
		streams = s.points[0].row.streams
	}
	switch s.key {
	case "queues":
		return fmt.Sprintf("queues, one SA (-P %d)", streams)
	case "interfaces":
		return fmt.Sprintf("interfaces (-P %d)", streams)
	case "sas":
		return fmt.Sprintf("SAs, one iface (-P %d)", streams)
	}
	return s.key
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if x <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
