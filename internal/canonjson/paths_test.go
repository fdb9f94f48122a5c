package canonjson

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// formatPath writes steps back as a path, escaping what needs it.
func formatPath(steps []step) string {
	var b strings.Builder
	for i, s := range steps {
		if s.elem {
			b.WriteString("[]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		for j := 0; j < len(s.name); j++ {
			if strings.IndexByte(`.[]\`, s.name[j]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(s.name[j])
		}
	}
	return b.String()
}

func FuzzVolatilePath(f *testing.F) {
	for _, s := range []string{"a", "meta.nonce", "items[].ts", "[].x", `a\.b`, "a[]", "a..b", `\`, "[][].a.b[]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		steps, err := parsePath(path)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidPath)
			return
		}
		require.NotEmpty(t, steps)
		require.False(t, steps[len(steps)-1].elem, "a path ends with a name")
		again, err := parsePath(formatPath(steps))
		require.NoError(t, err)
		require.Equal(t, steps, again)
	})
}
