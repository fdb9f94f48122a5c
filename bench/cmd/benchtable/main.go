// Command benchtable reads `go test -bench` output on stdin and prints a
// markdown table with one row per benchmark and one column per metric, each
// cell the median over the runs of that benchmark (-count).
//
//	go test -run '^$' -bench . -benchmem -count 5 | go run ./cmd/benchtable
//
// Benchmark names are split at the first slash into a scenario and a stack;
// the GOMAXPROCS suffix is dropped. Lines that are not benchmark results are
// ignored, except goos, goarch and cpu, which are printed under the table.
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	res, err := parse(os.Stdin)
	if err == nil && len(res.rows) == 0 {
		err = fmt.Errorf("no benchmark results on stdin")
	}
	if err == nil {
		w := bufio.NewWriter(os.Stdout)
		render(w, res)
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}
