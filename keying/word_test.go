package keying

import (
	"strings"
	"testing"
)

// plainAllMarked is allMarked one byte at a time.
func plainAllMarked(v string, table *[256]byte) bool {
	for i := 0; i < len(v); i++ {
		if table[v[i]] != 1 {
			return false
		}
	}
	return true
}

// TestAllMarkedEveryPosition puts every byte value at every position of
// strings of every length up to five steps, in both its forms and with
// both tables keying uses: allMarked's last step overlaps the one before,
// and no byte may be skipped.
func TestAllMarkedEveryPosition(t *testing.T) {
	for _, table := range []*[256]byte{&plainByte, &bareKeyByte} {
		for size := range 41 {
			plain := strings.Repeat("a", size)
			if got := allMarked(plain, table); !got {
				t.Fatalf("%d plain bytes: allMarked false", size)
			}
			for pos := range size {
				for c := range 256 {
					v := plain[:pos] + string(byte(c)) + plain[pos+1:]
					want := plainAllMarked(v, table)
					if got := allMarked(v, table); got != want {
						t.Fatalf("%d bytes, %#x at %d: allMarked %v, want %v", size, c, pos, got, want)
					}
					if got := allMarked([]byte(v), table); got != want {
						t.Fatalf("%d bytes, %#x at %d: allMarked of []byte %v, want %v", size, c, pos, got, want)
					}
				}
			}
		}
	}
}
