package linear

import (
	"os"
	"path/filepath"
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
