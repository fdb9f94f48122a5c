package linear

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckTimeout bounds the checker's search for one history; a search cut
// short reports porcupine.Unknown.
const CheckTimeout = 60 * time.Second

// Check checks a history against Model. When it is not linearizable it
// writes porcupine's visualization to a new directory under the system's
// temporary directory (kept after the test, to be opened in a browser) and
// returns its path.
func Check(ops []porcupine.Operation, name string) (porcupine.CheckResult, string, error) {
	return CheckModel(Model, ops, name)
}

// CheckModel checks a history against m (Model, EngineModel) as Check
// does.
func CheckModel(m porcupine.Model, ops []porcupine.Operation, name string) (porcupine.CheckResult, string, error) {
	res, info := porcupine.CheckOperationsVerbose(m, ops, CheckTimeout)
	if res != porcupine.Illegal {
		return res, "", nil
	}
	dir, err := os.MkdirTemp("", "idemkit-linear-")
	if err != nil {
		return res, "", err
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".html")
	return res, path, porcupine.VisualizePath(m, info, path)
}

// CheckT checks a history like Check and fails tb, naming the
// visualization, when it is not linearizable or the check did not finish.
func CheckT(tb testing.TB, ops []porcupine.Operation, name string) porcupine.CheckResult {
	tb.Helper()
	return CheckModelT(tb, Model, ops, name)
}

// CheckModelT checks a history against m like CheckModel and fails tb as
// CheckT does.
func CheckModelT(tb testing.TB, m porcupine.Model, ops []porcupine.Operation, name string) porcupine.CheckResult {
	tb.Helper()
	res, path, err := CheckModel(m, ops, name)
	switch {
	case err != nil:
		tb.Errorf("%s: not linearizable; writing the visualization: %v", name, err)
	case res == porcupine.Illegal:
		tb.Errorf("%s: history of %d operations is NOT linearizable; visualization: %s", name, len(ops), path)
	case res == porcupine.Unknown:
		tb.Errorf("%s: the checker did not finish within %v (%d operations)", name, CheckTimeout, len(ops))
	}
	return res
}

// IllegalKeys checks each key's history of ops (Input or ClaimInput
// operations) on its own against m and returns, in the order the keys
// first appear, those whose history is not linearizable: where an
// anomaly of a history that m rejects lies. A key whose check does not
// finish within CheckTimeout is not returned.
func IllegalKeys(m porcupine.Model, ops []porcupine.Operation) []string {
	var keys []string
	for _, part := range partitionBy(ops, opKey) {
		if res, _ := porcupine.CheckOperationsVerbose(m, part, CheckTimeout); res == porcupine.Illegal {
			keys = append(keys, opKey(part[0].Input))
		}
	}
	return keys
}

// opKey is the key an operation of Model or EngineModel touches.
func opKey(in any) string {
	switch in := in.(type) {
	case Input:
		return in.Key
	case ClaimInput:
		return in.Key
	}
	panic(fmt.Sprintf("linear: an operation of neither model: %T", in))
}

// Describe returns the operations of ops on key, by call time, one a
// line: the call and return times relative to origin (an offset from the
// history's start, such as the moment a fault began), the client, and
// the operation with its outcome as m describes it.
func Describe(m porcupine.Model, ops []porcupine.Operation, key string, origin time.Duration) string {
	var sel []porcupine.Operation
	for _, op := range ops {
		if opKey(op.Input) == key {
			sel = append(sel, op)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool { return sel[i].Call < sel[j].Call })
	var b strings.Builder
	for _, op := range sel {
		fmt.Fprintf(&b, "  [%+8.1fms, %+8.1fms] client %3d: %s\n",
			float64(time.Duration(op.Call)-origin)/1e6, float64(time.Duration(op.Return)-origin)/1e6,
			op.ClientId, m.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}
