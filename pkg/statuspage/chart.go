package statuspage

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/config"
)

// ChartDays is how many days the spend chart shows.
const ChartDays = 14

// Spend reports the cost of each of the last days (broker.Broker).
type Spend interface {
	DailySpend(days int) ([]broker.DaySpend, error)
}

// MotherSeries is the chart's series of Mother's own calls.
const MotherSeries = "Mother's own"

// chart geometry, in SVG user units.
const (
	chartW, chartH        = 720, 260
	plotLeft, plotRight   = 64, 16
	plotTop, plotBottom   = 16, 44
	legendRow, legendSize = 18, 10
)

// palette colours the series: Mother's own first, then the tiers in
// name order (a fourteenth tier and beyond share the last colour).
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// niceCeil is the smallest 1, 2 or 5 times a power of ten that is at
// least v (v > 0).
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// SpendChart draws days (oldest first) as an SVG: a stacked bar a day,
// Mother's own spend at the bottom and each tier's above it, a dollar
// axis, the days under the bars and a legend. Every bar segment is a rect
// with data-day, data-series and data-micro-usd, and a title saying it.
func SpendChart(days []broker.DaySpend) []byte {
	tiers := map[string]bool{}
	var most int64
	for _, d := range days {
		for t, c := range d.Tiers {
			if c > 0 {
				tiers[t] = true
			}
		}
		most = max(most, d.Total())
	}
	series := []string{MotherSeries}
	for t := range tiers {
		series = append(series, t)
	}
	slices.Sort(series[1:])
	colour := map[string]string{}
	for i, s := range series {
		colour[s] = palette[min(i, len(palette)-1)]
	}
	legendH := legendRow * ((len(series) + 3) / 4)
	h := chartH + legendH
	plotH := float64(chartH - plotTop - plotBottom)
	plotW := float64(chartW - plotLeft - plotRight)
	top := 0.01 // a cent, when nothing was spent: an empty chart with an axis
	if most > 0 {
		top = niceCeil(float64(most) / 1e6)
	}
	y := func(usd float64) float64 { return plotTop + plotH - usd/top*plotH }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="spend-title" data-top-usd="%g">`, chartW, h, chartW, h, top)
	var total int64
	for _, d := range days {
		total += d.Total()
	}
	fmt.Fprintf(&b, `<title id="spend-title">Spend of the last %d days by tier and Mother's own work: %s in all</title>`, len(days), config.FormatMicroUSD(total))
	// Presentation attributes, no style element: the page's Content
	// Security Policy allows no inline style.
	fmt.Fprintf(&b, `<g font-family="system-ui,sans-serif" font-size="11" fill="#444">`)
	// The dollar axis: 0, half and the top, with grid lines.
	for _, f := range []float64{0, 0.5, 1} {
		v := top * f
		fmt.Fprintf(&b, `<line class="grid" stroke="#e4e4e4" x1="%d" x2="%d" y1="%.2f" y2="%.2f"/>`, plotLeft, chartW-plotRight, y(v), y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.2f" text-anchor="end" dominant-baseline="middle">%s</text>`, plotLeft-6, y(v), config.FormatMicroUSD(int64(math.Round(v*1e6))))
	}
	fmt.Fprintf(&b, `<line class="axis" stroke="#888" x1="%d" x2="%d" y1="%.2f" y2="%.2f"/>`, plotLeft, chartW-plotRight, y(0), y(0))
	slot := plotW / float64(max(len(days), 1))
	barW := slot * 0.7
	for i, d := range days {
		x := plotLeft + slot*float64(i) + (slot-barW)/2
		base := 0.0
		for _, s := range series {
			c := d.Mother
			if s != MotherSeries {
				c = d.Tiers[s]
			}
			if c <= 0 {
				continue
			}
			usd := float64(c) / 1e6
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s" data-day="%s" data-series="%s" data-micro-usd="%d"><title>%s %s: %s</title></rect>`,
				x, y(base+usd), barW, y(base)-y(base+usd), colour[s], d.Day, html.EscapeString(s), c, d.Day, html.EscapeString(s), config.FormatMicroUSD(c))
			base += usd
		}
		if len(d.Day) == len("2006-01-02") {
			fmt.Fprintf(&b, `<text class="day" x="%.2f" y="%d" text-anchor="middle">%s</text>`, x+barW/2, chartH-plotBottom+16, d.Day[5:])
		}
	}
	for i, s := range series {
		lx := plotLeft + (i%4)*160
		ly := chartH + (i/4)*legendRow
		fmt.Fprintf(&b, `<g class="legend" data-series="%s"><rect x="%d" y="%d" width="%d" height="%d" fill="%s"/><text x="%d" y="%d">%s</text></g>`,
			html.EscapeString(s), lx, ly, legendSize, legendSize, colour[s], lx+legendSize+6, ly+legendSize-1, html.EscapeString(s))
	}
	b.WriteString(`</g></svg>`)
	return b.Bytes()
}
