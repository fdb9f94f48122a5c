package keying

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalidPath reports a volatile field path that does not follow the
// syntax described at WithVolatile.
var ErrInvalidPath = errors.New("keying: invalid volatile path")

// windowVolatile lists the top-level members WindowVolatile returns.
var windowVolatile = []string{"nonce", "random", "sign", "timestamp", "traceId"}

// WindowVolatile returns a new slice holding the paths of the top-level
// members that commonly change between two submissions of the same form
// (nonce, random, sign, timestamp and traceId), for a dedup window:
// NewFingerprinter(WithVolatile(WindowVolatile()...)). Key mode should not
// use it: there the whole payload is the request.
func WindowVolatile() []string {
	return slices.Clone(windowVolatile)
}

// pathNode is one level of a compiled set of volatile paths: the members
// and array elements, below a value, that hold or lead to volatile fields.
// A nil *pathNode drops nothing.
type pathNode struct {
	members map[string]*pathNode // by decoded member name
	elem    *pathNode            // every element of an array value
	drop    bool                 // the member that leads here is dropped
}

// member returns the node for the member named name, or nil.
func (n *pathNode) member(name []byte) *pathNode {
	if n == nil || n.members == nil {
		return nil
	}
	return n.members[string(name)]
}

// element returns the node for the elements of an array, or nil.
func (n *pathNode) element() *pathNode {
	if n == nil {
		return nil
	}
	return n.elem
}

// step is one step of a parsed path: a member name, or every element of an
// array when elem is set.
type step struct {
	name string
	elem bool
}

// compilePaths parses paths and merges them into one tree. It returns nil
// for no paths.
func compilePaths(paths []string) (*pathNode, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	root := &pathNode{}
	for _, path := range paths {
		steps, err := parsePath(path)
		if err != nil {
			return nil, err
		}
		root.add(steps)
	}
	return root, nil
}

// add inserts the path steps below n. A path ending at a member that an
// earlier path already drops adds nothing new; one that reaches below it
// changes nothing either, since the whole member goes.
func (n *pathNode) add(steps []step) {
	for _, s := range steps {
		if s.elem {
			if n.elem == nil {
				n.elem = &pathNode{}
			}
			n = n.elem
			continue
		}
		if n.members == nil {
			n.members = make(map[string]*pathNode)
		}
		child := n.members[s.name]
		if child == nil {
			child = &pathNode{}
			n.members[s.name] = child
		}
		n = child
	}
	n.drop = true
}

// parsePath splits a path written as described at WithVolatile into steps.
func parsePath(path string) ([]step, error) {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, path, why) }
	if !utf8.ValidString(path) {
		return nil, bad("invalid UTF-8")
	}
	var steps []step
	for i := 0; i < len(path); {
		switch {
		case strings.HasPrefix(path[i:], "[]"):
			steps = append(steps, step{elem: true})
			i += 2
			continue
		case path[i] == '.' && len(steps) > 0:
			i++ // a dot starts every member name but the first
		case len(steps) > 0:
			return nil, bad(fmt.Sprintf("expected '.' or \"[]\" at offset %d", i))
		}
		name, n, err := pathName(path[i:])
		if err != nil {
			return nil, bad(fmt.Sprintf("%v at offset %d", err, i+n))
		}
		steps = append(steps, step{name: name})
		i += n
	}
	if len(steps) == 0 || steps[len(steps)-1].elem {
		return nil, bad("a path must end with a member name")
	}
	return steps, nil
}

// pathName reads the member name at the start of s, up to an unescaped '.'
// or '['. It returns the unescaped name and the number of bytes read, or an
// error and the offset of the fault.
func pathName(s string) (string, int, error) {
	var b strings.Builder
	i := 0
loop:
	for i < len(s) {
		switch c := s[i]; c {
		case '.', '[':
			break loop
		case ']':
			return "", i, errors.New("unescaped ']'")
		case '\\':
			if i+1 >= len(s) || !strings.ContainsRune(`.[]\`, rune(s[i+1])) {
				return "", i, errors.New(`'\' must precede one of . [ ] \`)
			}
			b.WriteByte(s[i+1])
			i += 2
		default:
			b.WriteByte(c)
			i++
		}
	}
	if i == 0 {
		return "", 0, errors.New("empty member name")
	}
	return b.String(), i, nil
}
