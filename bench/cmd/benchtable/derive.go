package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Conventions of the bench module that the derived tables rely on.
const (
	refStack      = "fiber"  // the stack every other is compared with, per scenario
	floorScenario = "OneGET" // each HTTP stack's floor: its handler after one raw Redis GET
	parallelPre   = "Parallel"
)

// platform names the HTTP stack (floor row) a middleware stack runs on.
func platform(stack string) string {
	if strings.Contains(stack, "fiber") {
		return "fiber"
	}
	return "nethttp"
}

// paired returns the median over passes of f(a[i], b[i]), pairing the
// values of one pass (benchmarks run interleaved, one value per pass), so
// drift on a busy machine cancels out. When the counts differ it applies f
// to the medians.
func paired(a, b []float64, f func(x, y float64) float64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	if len(a) != len(b) {
		return f(median(a), median(b))
	}
	out := make([]float64, len(a))
	for i := range a {
		out[i] = f(a[i], b[i])
	}
	return median(out)
}

func ratio(x, y float64) float64 { return x / y }
func diff(x, y float64) float64  { return x - y }

// renderDerived writes the comparison table: each middleware row beside its
// scenario's Fiber row and its own stack's one-GET floor.
func renderDerived(w io.Writer, res *results) {
	find := map[string]*row{}
	for _, rw := range res.rows {
		find[rw.scenario+"/"+rw.stack] = rw
	}
	fmt.Fprintf(w, "\n| scenario | stack | time/op | vs %s | floor (%s) | over floor | vs floor | allocs over floor | Redis µs/op | Redis µs vs %s |\n", refStack, floorScenario, refStack)
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, rw := range res.rows {
		if rw.scenario != "FirstExecution" && rw.scenario != "Replay" {
			continue
		}
		ns := rw.values["ns/op"]
		ref := find[rw.scenario+"/"+refStack]
		floor := find[floorScenario+"/"+platform(rw.stack)]
		cells := []string{rw.scenario, rw.stack, cell("ns/op", ns)}
		cells = append(cells, factor(ref, func(r *row) float64 { return paired(ns, r.values["ns/op"], ratio) }))
		if floor == nil {
			cells = append(cells, "–", "–", "–", "–")
		} else {
			fns := floor.values["ns/op"]
			cells = append(cells, platform(rw.stack)+" "+cell("ns/op", fns),
				signedUS(paired(ns, fns, diff)/1e3),
				num(paired(ns, fns, ratio))+"x",
				signed(paired(rw.values["allocs/op"], floor.values["allocs/op"], diff)))
		}
		rus := rw.values["redis-us/op"]
		cells = append(cells, cell("redis-us/op", rus))
		cells = append(cells, factor(ref, func(r *row) float64 { return paired(rus, r.values["redis-us/op"], ratio) }))
		writeRow(w, cells)
	}
}

// factor formats f(ref) as a ratio, "–" without a reference.
func factor(ref *row, f func(*row) float64) string {
	if ref == nil {
		return "–"
	}
	v := f(ref)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return num(v) + "x"
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func signed(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	if v >= 0 {
		s = "+" + s
	}
	return s
}

// renderScaling writes the parallel scaling table: per scenario and stack,
// req/s at each client count and its ratio to one client, paired by pass.
func renderScaling(w io.Writer, res *results) {
	type group struct {
		scenario, stack string
		byClients       map[string]*row
		order           []string
	}
	var groups []*group
	index := map[string]*group{}
	for _, rw := range res.rows {
		if !strings.HasPrefix(rw.scenario, parallelPre) {
			continue
		}
		stack, clients, ok := strings.Cut(rw.stack, "/")
		if !ok {
			continue
		}
		g := index[rw.scenario+"/"+stack]
		if g == nil {
			g = &group{scenario: rw.scenario, stack: stack, byClients: map[string]*row{}}
			index[rw.scenario+"/"+stack] = g
			groups = append(groups, g)
		}
		g.byClients[clients] = rw
		g.order = append(g.order, clients)
	}
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(w, "\n| scenario | stack | clients | req/s | vs 1 client | allocs/op |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: |")
	for _, g := range groups {
		one := g.byClients["c1"]
		for _, clients := range g.order {
			rw := g.byClients[clients]
			rps := rw.values["req/s"]
			vs := "–"
			if one != nil {
				vs = num(paired(rps, one.values["req/s"], ratio)) + "x"
			}
			writeRow(w, []string{g.scenario, g.stack, strings.TrimPrefix(clients, "c"),
				strconv.FormatFloat(math.Round(median(rps)), 'f', 0, 64), vs, cell("allocs/op", rw.values["allocs/op"])})
		}
	}
}
