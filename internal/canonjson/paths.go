package canonjson

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidPath reports a volatile field path that does not follow the
// syntax described at CheckPath.
var ErrInvalidPath = errors.New("keying: invalid volatile path")

// Paths is a compiled set of volatile paths, as Compile returns it. Each
// Paths is one level of the set: the members and array elements, below a
// value, that hold or lead to volatile fields. A nil *Paths drops nothing.
type Paths struct {
	members map[string]*Paths // by decoded member name
	elem    *Paths            // every element of an array value
	drop    bool              // the member that leads here is dropped
}

// member returns the node for the member named name, or nil.
func (n *Paths) member(name []byte) *Paths {
	if n == nil || n.members == nil {
		return nil
	}
	return n.members[string(name)]
}

// element returns the node for the elements of an array, or nil.
func (n *Paths) element() *Paths {
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

// Compile parses paths, each written as described at CheckPath, and
// merges them into one tree. It returns nil for no paths, and an error
// wrapping ErrInvalidPath for the first malformed one.
func Compile(paths []string) (*Paths, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	root := &Paths{}
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
func (n *Paths) add(steps []step) {
	for _, s := range steps {
		if s.elem {
			if n.elem == nil {
				n.elem = &Paths{}
			}
			n = n.elem
			continue
		}
		if n.members == nil {
			n.members = make(map[string]*Paths)
		}
		child := n.members[s.name]
		if child == nil {
			child = &Paths{}
			n.members[s.name] = child
		}
		n = child
	}
	n.drop = true
}

// CheckPath returns nil when path is well formed, and otherwise an error
// wrapping ErrInvalidPath that says what is wrong and where. A path names
// members from the top of the document, matched case-sensitively after
// unescaping: "a" is the top-level member a, "a.b" member b of a, "a[].b"
// member b of every element of the array a, "[].b" member b of every
// element of a top-level array. It ends with a member name. '\' makes the
// next '.', '[', ']' or '\' part of a name.
func CheckPath(path string) error {
	_, err := parsePath(path)
	return err
}

// parsePath splits a path written as described at CheckPath into steps.
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
