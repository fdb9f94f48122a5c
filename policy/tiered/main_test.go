package tiered_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quietLogger drops go-redis's log lines, which the fault tests would
// otherwise fill with expected dial errors.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}
