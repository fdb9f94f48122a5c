package options_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

type config struct{ n, m int }

type option func(*config) error

func withN(n int) option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("withN(%d): must be at least 1", n)
		}
		c.n = n
		return nil
	}
}

func withM(m int) option {
	return func(c *config) error {
		if m < 0 {
			return fmt.Errorf("withM(%d): must not be negative", m)
		}
		c.m = m
		return nil
	}
}

func TestApplyAppliesValidOptionsInOrder(t *testing.T) {
	var c config
	if err := options.Apply(&c, []option{withN(1), withM(2), withN(3)}); err != nil {
		t.Fatal(err)
	}
	if c != (config{n: 3, m: 2}) {
		t.Errorf("config %+v, want n 3 (the later option wins), m 2", c)
	}
	if err := options.Apply(&c, []option(nil)); err != nil {
		t.Errorf("no options: %v", err)
	}
}

func TestApplyReportsEveryErrorWrappedInErrInvalid(t *testing.T) {
	var c config
	err := options.Apply(&c, []option{withN(0), nil, withM(-1), withM(5)})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Apply: %v, want an error wrapping store.ErrInvalid", err)
	}
	for _, want := range []string{"withN(0): must be at least 1", "option 2 is nil", "withM(-1): must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Apply: %q does not say %q", err, want)
		}
	}
	if c.m != 5 {
		t.Errorf("the valid option after the invalid ones was not applied: %+v", c)
	}
}

func TestInvalid(t *testing.T) {
	if err := options.Invalid(nil, nil); err != nil {
		t.Errorf("Invalid(nil, nil) = %v", err)
	}
	cause := errors.New("cause")
	if err := options.Invalid(nil, cause); !errors.Is(err, store.ErrInvalid) || !errors.Is(err, cause) {
		t.Errorf("Invalid(nil, cause) = %v", err)
	}
}
