package store

import (
	"fmt"
	"strconv"
	"time"
)

// Int returns the value of parameter name as a decimal integer no smaller
// than least, and whether it was given. A value that is not such an
// integer is an error wrapping ErrInvalid that names the parameter.
func (p *Params) Int(name string, least int) (int, bool, error) {
	s, ok, err := p.String(name)
	if !ok || err != nil {
		return 0, false, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		return 0, false, fmt.Errorf("%w: parameter %s=%q: want an integer >= %d", ErrInvalid, name, s, least)
	}
	return n, true, nil
}

// Duration returns the value of parameter name as a time.ParseDuration
// string ("250ms", "1m30s") of at least least, and whether it was given.
// Any other value is an error wrapping ErrInvalid that names the
// parameter.
func (p *Params) Duration(name string, least time.Duration) (time.Duration, bool, error) {
	s, ok, err := p.String(name)
	if !ok || err != nil {
		return 0, false, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < least {
		return 0, false, fmt.Errorf("%w: parameter %s=%q: want a duration such as 250ms or 2s, at least %v", ErrInvalid, name, s, least)
	}
	return d, true, nil
}

// Bool returns the value of parameter name, which must be "true", "false",
// "1" or "0", and whether it was given. Any other value, the empty one
// included, is an error wrapping ErrInvalid that names the parameter.
func (p *Params) Bool(name string) (bool, bool, error) {
	s, ok, err := p.String(name)
	if !ok || err != nil {
		return false, false, err
	}
	switch s {
	case "true", "1":
		return true, true, nil
	case "false", "0":
		return false, true, nil
	}
	return false, false, fmt.Errorf("%w: parameter %s=%q: want true or false", ErrInvalid, name, s)
}
