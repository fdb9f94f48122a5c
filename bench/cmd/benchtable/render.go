package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// unitTitles are the column titles of the units go test and the bench
// package report; other units are shown as they are.
var unitTitles = map[string]string{
	"ns/op":          "time/op",
	"B/op":           "B/op",
	"allocs/op":      "allocs/op",
	"redis-calls/op": "Redis calls/op",
	"runs/key":       "handler runs/key",
	"redis-us/op":    "Redis µs/op",
	"409s/key":       "409s/key",
}

// render writes res as a markdown table followed by the environment lines.
func render(w io.Writer, res *results) {
	var rows []*row
	for _, rw := range res.rows {
		if !strings.HasPrefix(rw.scenario, parallelPre) && rw.scenario != pairedScenario { // in their own tables
			rows = append(rows, rw)
		}
	}
	var units []string
	for _, u := range res.units {
		if slices.ContainsFunc(rows, func(rw *row) bool { return len(rw.values[u]) > 0 }) {
			units = append(units, u)
		}
	}
	head := []string{"scenario", "stack"}
	for _, u := range units {
		head = append(head, title(u))
	}
	writeRow(w, head)
	writeRow(w, separator(len(head)))
	for _, rw := range rows {
		cells := []string{rw.scenario, rw.stack}
		for _, u := range units {
			cells = append(cells, cell(u, rw.values[u]))
		}
		writeRow(w, cells)
	}
	renderPaired(w, res)
	renderDerived(w, res)
	renderScaling(w, res)
	if len(res.env) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(res.env, ", "))
	}
}

func title(unit string) string {
	if t, ok := unitTitles[unit]; ok {
		return t
	}
	return unit
}

func separator(n int) []string {
	s := []string{"---", "---"}
	for len(s) < n {
		s = append(s, "---:")
	}
	return s
}

func writeRow(w io.Writer, cells []string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// cell formats the median of vs in unit; "–" when the benchmark did not
// report the unit.
func cell(unit string, vs []float64) string {
	if len(vs) == 0 {
		return "–"
	}
	m := median(vs)
	switch unit {
	case "ns/op":
		return duration(m)
	case "B/op", "allocs/op":
		return strconv.FormatFloat(m, 'f', 0, 64)
	default:
		return strconv.FormatFloat(math.Round(m*100)/100, 'f', -1, 64)
	}
}

// median returns the median of vs (the mean of the middle two for an even
// count), leaving vs unchanged.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// duration formats nanoseconds with three significant figures.
func duration(ns float64) string {
	switch {
	case ns >= 1e9:
		return sig(ns/1e9) + " s"
	case ns >= 1e6:
		return sig(ns/1e6) + " ms"
	case ns >= 1e3:
		return sig(ns/1e3) + " µs"
	default:
		return sig(ns) + " ns"
	}
}

// sig formats v, between 1 and 1000, with three significant figures (at
// least the integer part).
func sig(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
