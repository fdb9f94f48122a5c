package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// results is the parsed benchmark output.
type results struct {
	rows  []*row   // in order of first appearance
	units []string // every metric unit, in order of first appearance
	env   []string // goos, goarch and cpu lines
}

// row is one benchmark: every value reported for each unit, one per run.
type row struct {
	scenario, stack string
	values          map[string][]float64
}

// procSuffix is the -GOMAXPROCS suffix go test appends to names.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parse reads go test -bench output.
func parse(r io.Reader) (*results, error) {
	res := &results{}
	byName := map[string]*row{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if isEnv(line) {
			res.env = appendNew(res.env, line)
			continue
		}
		name, metrics, ok, err := parseLine(line)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		rw := byName[name]
		if rw == nil {
			rw = newRow(name)
			byName[name] = rw
			res.rows = append(res.rows, rw)
		}
		for _, m := range metrics {
			rw.values[m.unit] = append(rw.values[m.unit], m.value)
			if !seen[m.unit] {
				seen[m.unit] = true
				res.units = append(res.units, m.unit)
			}
		}
	}
	return res, sc.Err()
}

func isEnv(line string) bool {
	for _, p := range []string{"goos:", "goarch:", "cpu:"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}

func newRow(name string) *row {
	scenario, stack, _ := strings.Cut(name, "/")
	return &row{scenario: scenario, stack: stack, values: map[string][]float64{}}
}

// metric is one value/unit pair of a result line.
type metric struct {
	value float64
	unit  string
}

// parseLine parses "BenchmarkName-P  N  v1 unit1  v2 unit2 ...". ok is false
// for lines that are not results (headers, PASS, logs, failures).
func parseLine(line string) (name string, metrics []metric, ok bool, err error) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false, nil
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, false, nil
	}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false, fmt.Errorf("%q: value %q: %w", line, f[i], err)
		}
		metrics = append(metrics, metric{value: v, unit: f[i+1]})
	}
	name = procSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
	return name, metrics, true, nil
}
