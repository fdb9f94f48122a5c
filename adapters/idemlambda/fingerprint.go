package idemlambda

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"

	"github.com/idemkit/idemkit/keying"
)

// fingerprint returns the payload fingerprint of doc over paths: a
// SHA-256 of each path's text and the canonical JSON (keying.Canonicalize)
// of the value it names, or a mark that it names none. Two events whose
// selected values are equal as JSON (whatever their member order or
// spacing) have one fingerprint; any other difference in them changes it.
func fingerprint(doc *document, paths []path) (string, error) {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	field := func(b []byte) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	for _, p := range paths {
		field([]byte(p.text))
		raw, err := p.lookup(doc)
		switch {
		case errors.Is(err, errAbsent):
			h.Write([]byte{0}) // absent: unlike any JSON value, null included
			continue
		case err != nil:
			return "", err
		}
		canon, err := keying.Canonicalize(raw, nil)
		if err != nil {
			return "", err
		}
		h.Write([]byte{1})
		field(canon)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
