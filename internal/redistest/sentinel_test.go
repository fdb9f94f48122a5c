package redistest_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/redistest"
)

func TestStartSentinel(t *testing.T) {
	st := redistest.StartSentinel(t)
	if got := st.MasterAddr(); got != st.Primary.Addr() {
		t.Fatalf("MasterAddr = %q, want the primary %s", got, st.Primary.Addr())
	}
	if len(st.Addrs()) != 3 {
		t.Fatalf("Addrs = %v", st.Addrs())
	}
}
