package bench

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v5"

	"github.com/idemkit/idemkit/adapters/idemecho"
	"github.com/idemkit/idemkit/adapters/idemgin"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// framework is one net/http-based framework with idemkit's adapter for
// it: the same handler bare, after one raw Redis GET (the floor a replay
// over Redis cannot beat), and behind the adapter's Idempotency middleware
// over redisstore, with a near cache in front when near is set.
type framework struct {
	name    string
	bare    func(tb testing.TB, o *orders) string
	floor   func(tb testing.TB, o *orders) string
	guarded func(tb testing.TB, o *orders, near bool) string
}

var frameworks = []framework{
	{"gin", func(tb testing.TB, o *orders) string { return startGin(tb, ginHandler(o)) },
		func(tb testing.TB, o *orders) string { return startGin(tb, ginFloor(tb), ginHandler(o)) },
		startIdemkitGin},
	{"echo", func(tb testing.TB, o *orders) string { return startEcho(tb, echoHandler(o)) },
		func(tb testing.TB, o *orders) string { return startEcho(tb, echoHandler(o), echoFloor(tb)) },
		startIdemkitEcho},
}

// variants are a framework's rows, in the order BenchmarkFrameworks runs
// them.
var variants = []struct {
	name   string
	start  func(f framework, tb testing.TB, o *orders) string
	replay bool // one completed key; otherwise no key (the bare and floor rows ignore it)
}{
	{"bare", func(f framework, tb testing.TB, o *orders) string { return f.bare(tb, o) }, false},
	{"floor", func(f framework, tb testing.TB, o *orders) string { return f.floor(tb, o) }, true},
	{"replay", func(f framework, tb testing.TB, o *orders) string { return f.guarded(tb, o, false) }, true},
	{"replay-near", func(f framework, tb testing.TB, o *orders) string { return f.guarded(tb, o, true) }, true},
}

// BenchmarkFrameworks measures, serially, each framework's bare handler,
// its one-GET floor, and idemkit's adapter replaying a stored response
// over Redis and from a near cache (no round trip). callgrind.sh counts
// its instructions per request: 'Frameworks$/^gin$/^replay$'.
func BenchmarkFrameworks(b *testing.B) {
	for _, f := range frameworks {
		b.Run(f.name, func(b *testing.B) {
			for _, v := range variants {
				b.Run(v.name, func(b *testing.B) {
					key := newKey() // the floor and bare rows ignore it; sent so the request bytes match
					benchSerial(b, v.start(f, b, &orders{}), func() string { return key })
				})
			}
		})
	}
}

// BenchmarkFrameworksPaired measures each framework's rows in one loop, in
// a balanced order (pairedOrder), and reports each one's p50 and the
// ratios the adapters are held to: a replay over Redis against the
// framework's one-GET floor, a near-cache replay against its bare handler.
func BenchmarkFrameworksPaired(b *testing.B) {
	for _, f := range frameworks {
		b.Run(f.name, func(b *testing.B) {
			var ts []*pairedTarget
			for _, v := range variants {
				key := newKey()
				ts = append(ts, &pairedTarget{name: v.name, url: v.start(f, b, &orders{}), next: func() string { return key }})
			}
			c := newHTTPClient(b)
			for _, t := range ts {
				mustPost(b, c, t.url, t.next(), http.StatusCreated) // warm up; stores the replayed response
			}
			round := 0
			for b.Loop() {
				for _, j := range pairedOrder(round, len(ts)) {
					t := ts[j]
					start := time.Now()
					mustPost(b, c, t.url, t.next(), http.StatusCreated)
					t.lat = append(t.lat, time.Since(start))
				}
				round++
			}
			p := map[string]time.Duration{}
			for _, t := range ts {
				p[t.name] = p50(t.lat)
				b.ReportMetric(p[t.name].Seconds()*1e6, "p50us:"+t.name)
			}
			b.ReportMetric(float64(p["replay"])/float64(p["floor"]), "replay/floor")
			b.ReportMetric(float64(p["replay-near"])/float64(p["bare"]), "near/bare")
		})
	}
}

// startGin serves handlers on POST orderPath of a gin engine on a loopback
// net/http server.
func startGin(tb testing.TB, handlers ...gin.HandlerFunc) string {
	r := gin.New()
	r.POST(orderPath, handlers...)
	return startNetHTTP(tb, r)
}

// ginHandler is orders.create as a gin handler, answering through gin's
// render.
func ginHandler(o *orders) gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, err := io.Copy(io.Discard, c.Request.Body); err != nil {
			c.AbortWithStatus(http.StatusBadRequest)
			return
		}
		id, body := o.create()
		c.Header("Location", location(id))
		c.Data(http.StatusCreated, "application/json", body)
	}
}

// ginFloor is one raw Redis GET before the handler.
func ginFloor(tb testing.TB) gin.HandlerFunc {
	rdb := floorClient(tb)
	return func(c *gin.Context) {
		if err := rdb.Get(c.Request.Context(), floorKey).Err(); err != nil {
			c.String(http.StatusInternalServerError, "redis: "+err.Error())
			c.Abort()
		}
	}
}

// startIdemkitGin serves o behind idemgin's Idempotency middleware over
// redisstore (behind a near cache when near is set).
func startIdemkitGin(tb testing.TB, o *orders, near bool) string {
	tb.Helper()
	guard, err := idemgin.Idempotency(newEngine(tb, near), idemgin.WithPrincipal(idemgin.TrustedHeaderPrincipal(userHeader)))
	if err != nil {
		tb.Fatalf("idemgin.Idempotency: %v", err)
	}
	return startGin(tb, guard, ginHandler(o))
}

// startEcho serves h behind mw on POST orderPath of an Echo server on a
// loopback port.
func startEcho(tb testing.TB, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) string {
	e := echo.New()
	e.POST(orderPath, h, mw...)
	return startNetHTTP(tb, e)
}

// echoHandler is orders.create as an Echo handler.
func echoHandler(o *orders) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
			return echo.ErrBadRequest
		}
		id, body := o.create()
		c.Response().Header().Set("Location", location(id))
		return c.Blob(http.StatusCreated, "application/json", body)
	}
}

// echoFloor is one raw Redis GET before the handler.
func echoFloor(tb testing.TB) echo.MiddlewareFunc {
	rdb := floorClient(tb)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			if err := rdb.Get(c.Request().Context(), floorKey).Err(); err != nil {
				return c.String(http.StatusInternalServerError, "redis: "+err.Error())
			}
			return next(c)
		}
	}
}

// startIdemkitEcho serves o behind idemecho's Idempotency middleware over
// redisstore (behind a near cache when near is set).
func startIdemkitEcho(tb testing.TB, o *orders, near bool) string {
	tb.Helper()
	guard, err := idemecho.Idempotency(newEngine(tb, near), idemecho.WithPrincipal(idemecho.TrustedHeaderPrincipal(userHeader)))
	if err != nil {
		tb.Fatalf("idemecho.Idempotency: %v", err)
	}
	return startEcho(tb, echoHandler(o), guard)
}
