package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/idemkit/idemkit/bench
cpu: Some CPU @ 2.00GHz
BenchmarkReplay/idemkit-2         	   10000	    120500 ns/op	         1.000 redis-calls/op	    9000 B/op	      90 allocs/op
BenchmarkReplay/idemkit-2         	   10000	    110000 ns/op	         1.000 redis-calls/op	    9100 B/op	      91 allocs/op
BenchmarkReplay/idemkit-2         	   10000	    130000 ns/op	         1.000 redis-calls/op	    9200 B/op	      92 allocs/op
BenchmarkReplay/fiber-2           	   10000	     99000 ns/op	         1.000 redis-calls/op	    7000 B/op	      60 allocs/op
BenchmarkOneGET/nethttp-2         	   10000	    100000 ns/op	    8000 B/op	      80 allocs/op
BenchmarkOneGET/nethttp-2         	   10000	    100000 ns/op	    8000 B/op	      80 allocs/op
BenchmarkOneGET/nethttp-2         	   10000	    120000 ns/op	    8000 B/op	      80 allocs/op
BenchmarkParallelReplay/fiber/c1-2	   10000	    100000 ns/op	     10000 req/s	    7000 B/op	      60 allocs/op
BenchmarkParallelReplay/fiber/c8-2	   10000	     50000 ns/op	     20000 req/s	    7000 B/op	      60 allocs/op
BenchmarkDuplicates/fiber-2       	      50	  21000000 ns/op	         2.000 runs/key	         0 409s/key	  500000 B/op	    5000 allocs/op
    some_test.go:12: a log line
PASS
ok  	github.com/idemkit/idemkit/bench	12.3s
`

func TestParseAndRender(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	require.NoError(t, err)
	require.Len(t, res.rows, 6)
	assert.Equal(t, []string{"ns/op", "redis-calls/op", "B/op", "allocs/op", "req/s", "runs/key", "409s/key"}, res.units)
	assert.Equal(t, []float64{120500, 110000, 130000}, res.rows[0].values["ns/op"])

	var out strings.Builder
	render(&out, res)
	want := `| scenario | stack | time/op | Redis calls/op | B/op | allocs/op | handler runs/key | 409s/key |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |
| Replay | idemkit | 120 µs | 1 | 9100 | 91 | – | – |
| Replay | fiber | 99.0 µs | 1 | 7000 | 60 | – | – |
| OneGET | nethttp | 100 µs | – | 8000 | 80 | – | – |
| Duplicates | fiber | 21.0 ms | – | 500000 | 5000 | 2 | 0 |

| scenario | stack | time/op | vs fiber | floor (OneGET) | over floor | vs floor | allocs over floor | Redis µs/op | Redis µs vs fiber |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| Replay | idemkit | 120 µs | 1.22x | nethttp 100 µs | +10.0 µs | 1.10x | +11 | – | – |
| Replay | fiber | 99.0 µs | 1.00x | – | – | – | – | – | – |

| scenario | stack | clients | req/s | vs 1 client | allocs/op |
| --- | --- | ---: | ---: | ---: | ---: |
| ParallelReplay | fiber | 1 | 10000 | 1.00x | 60 |
| ParallelReplay | fiber | 8 | 20000 | 2.00x | 60 |

goos: linux, goarch: amd64, cpu: Some CPU @ 2.00GHz
`
	assert.Equal(t, want, out.String())
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	in := []float64{3, 1, 2}
	median(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "median must not reorder its input")
}

func TestParseLineRejectsNonResults(t *testing.T) {
	for _, line := range []string{
		"BenchmarkX",
		"BenchmarkX-2 --- FAIL: something went wrong",
		"PASS",
		"ok  \tpkg\t1.0s",
	} {
		_, _, ok, err := parseLine(line)
		assert.False(t, ok, line)
		assert.NoError(t, err, line)
	}
	_, _, _, err := parseLine("BenchmarkX-2 10 abc ns/op")
	assert.Error(t, err)
}

func TestPairedTable(t *testing.T) {
	in := `BenchmarkPaired/Replay-2  100  1 ns/op  150 p50us:fiber  160 p50us:floor-fiber  220 p50us:floor-nethttp  180 p50us:idemkit  80 p50us:idemkit-near
BenchmarkPaired/Replay-2  100  1 ns/op  160 p50us:fiber  150 p50us:floor-fiber  200 p50us:floor-nethttp  200 p50us:idemkit  88 p50us:idemkit-near
`
	res, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	var out strings.Builder
	renderPaired(&out, res)
	want := `
| scenario (paired) | stack | p50 | vs fiber | floor p50 | over floor | vs floor |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
| Replay | fiber | 155 µs | 1.00x | fiber 155 µs | +0.00 ns | 1.00x |
| Replay | idemkit | 190 µs | 1.23x | nethttp 210 µs | −20.0 µs | 0.91x |
| Replay | idemkit-near | 84.0 µs | 0.54x | nethttp 210 µs | −126 µs | 0.40x |
`
	assert.Equal(t, want, out.String())
}
