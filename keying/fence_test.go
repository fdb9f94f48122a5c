package keying

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFence(t *testing.T) {
	for _, c := range []struct {
		values  []string
		fence   uint64
		present bool
		bad     bool
	}{
		{values: nil},
		{values: []string{"0"}, present: true},
		{values: []string{FormatFence(117714036866940928)}, fence: 117714036866940928, present: true},
		{values: []string{"18446744073709551615"}, fence: 1<<64 - 1, present: true},
		{values: []string{"18446744073709551616"}, present: true, bad: true},
		{values: []string{""}, present: true, bad: true},
		{values: []string{"+1"}, present: true, bad: true},
		{values: []string{" 1"}, present: true, bad: true},
		{values: []string{"0x10"}, present: true, bad: true},
		{values: []string{"1", "2"}, present: true, bad: true},
	} {
		fence, present, err := ParseFence(c.values)
		if fence != c.fence || present != c.present || (err != nil) != c.bad {
			t.Errorf("ParseFence(%q) = %d, %v, %v; want %d, %v, error %v", c.values, fence, present, err, c.fence, c.present, c.bad)
		}
		if err != nil && (!errors.Is(err, ErrMalformedFence) || (len(c.values) == 1 && c.values[0] != "" && strings.Contains(err.Error(), c.values[0]))) {
			t.Errorf("ParseFence(%q) error %q: want ErrMalformedFence, without the value", c.values, err)
		}
	}
}
