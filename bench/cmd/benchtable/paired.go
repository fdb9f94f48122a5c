package main

import (
	"fmt"
	"io"
	"strings"
)

// Units of BenchmarkPaired: p50us:<stack>, and p50us:floor-<platform> for
// the one-GET floors measured in the same loop.
const (
	pairedScenario = "Paired"
	p50Prefix      = "p50us:"
	floorPrefix    = "floor-"
)

// renderPaired writes the paired table: per scenario and stack, the median
// latency, its ratio to Fiber's middleware and its increment over its own
// stack's floor, each paired within a pass and then the median of passes.
func renderPaired(w io.Writer, res *results) {
	header := false
	for _, rw := range res.rows {
		if rw.scenario != pairedScenario {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\n| scenario (paired) | stack | p50 | vs %s | floor p50 | over floor | vs floor |\n", refStack)
			fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
			header = true
		}
		ref := rw.values[p50Prefix+refStack]
		for _, u := range res.units {
			stack, ok := strings.CutPrefix(u, p50Prefix)
			if !ok || strings.HasPrefix(stack, floorPrefix) || len(rw.values[u]) == 0 {
				continue
			}
			v := rw.values[u]
			floor := rw.values[p50Prefix+floorPrefix+platform(stack)]
			writeRow(w, []string{rw.stack, stack, us(median(v)),
				num(paired(v, ref, ratio)) + "x",
				platform(stack) + " " + us(median(floor)),
				signedUS(paired(v, floor, diff)),
				num(paired(v, floor, ratio)) + "x"})
		}
	}
}

func us(v float64) string { return cell("ns/op", []float64{v * 1e3}) }

// signedUS formats a difference in microseconds with its sign.
func signedUS(v float64) string {
	if v < 0 {
		return "−" + us(-v)
	}
	return "+" + us(v)
}
