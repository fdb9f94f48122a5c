package idemlambda_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// redisAddr is the Redis server TestMain starts for the tests (never the
// one on 6379).
var redisAddr string

func TestMain(m *testing.M) {
	if runtimeChild() { // a child of a Runtime API test: lambda.Start ran
		return
	}
	s, stop, err := redistest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = s.Addr()
	stopDynalite, err := startDynalite()
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopDynalite()
	stop()
	os.Exit(code)
}

// opener opens a fresh store for one test.
type opener struct {
	name string
	open func(t testing.TB) store.Store
}

var openers = []opener{
	{"memstore", func(t testing.TB) store.Store { return testkit.NewMem(t) }},
	{"redis", func(t testing.TB) store.Store {
		st, err := redisstore.New(redisClient(t))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"dynamodb", func(t testing.TB) store.Store {
		s, _ := openDynamo(t)
		return s
	}},
}

// namespaces numbers the engines' key namespaces, so tests sharing the
// Redis server never meet.
var namespaces atomic.Int64

// engineOn returns an engine over s in a fresh namespace, observer off.
func engineOn(t testing.TB, s store.Store, opts ...idemkit.Option) *idemkit.Engine {
	t.Helper()
	ns := idemkit.WithNamespace(fmt.Sprintf("lambda%d", namespaces.Add(1)))
	return testkit.NewEngineOn(t, s, append([]idemkit.Option{ns}, opts...)...)
}

// eachStore runs f as a subtest over every store opener, with an engine
// over a fresh store.
func eachStore(t *testing.T, f func(t *testing.T, e *idemkit.Engine), opts ...idemkit.Option) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) { f(t, engineOn(t, o.open(t), opts...)) })
	}
}

// load decodes testdata/name into a T, as the Lambda runtime decodes an
// event for a handler of T.
func load[T any](t testing.TB, name string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// redisClient returns a client of the test Redis, closed when t ends.
func redisClient(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testkitWait is testkit.WaitFor.
func testkitWait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, what, cond)
}

// The principals of the API Gateway test events: claims API Gateway's
// authorizers write.
var (
	restPrincipal = idemlambda.WithPrincipalPath("requestContext.authorizer.claims.sub")
	httpPrincipal = idemlambda.WithPrincipalPath("requestContext.authorizer.jwt.claims.sub")
)
