package idemkit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Codec turns the typed helper Do's results into bytes and back.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default Codec, encoding/json.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// ErrorCodec decides which errors of fn are final for the key, and how a
// final error is stored and replayed. A final error is recorded like a
// result: every repeat gets it back. Any other error releases the key so a
// retry runs fn again.
type ErrorCodec interface {
	// EncodeError reports whether err is final and, if it is, its stored
	// form.
	EncodeError(err error) (data []byte, final bool)
	// DecodeError rebuilds a stored final error for a replay.
	DecodeError(data []byte) error
}

// FinalErrors returns an ErrorCodec that treats an error as final when it
// matches one of errs under errors.Is. A final error is stored with the
// registered error it matched and its message; its replay is a
// *ReplayedError with the same message that still matches the registered
// error under errors.Is, so callers handle a replay as they handled the
// first call. A registered error is identified in the store by its text:
// keep those texts stable and distinct across deployments. Nil errors are
// ignored.
func FinalErrors(errs ...error) ErrorCodec {
	f := finalErrors{}
	for _, err := range errs {
		if err != nil {
			f.known = append(f.known, err)
		}
	}
	return f
}

type finalErrors struct{ known []error }

// EncodeError stores uvarint(len(id)), id, message, where id is the text of
// the registered error that err matches.
func (f finalErrors) EncodeError(err error) ([]byte, bool) {
	for _, target := range f.known {
		if errors.Is(err, target) {
			id, msg := target.Error(), err.Error()
			b := make([]byte, 0, binary.MaxVarintLen64+len(id)+len(msg))
			b = binary.AppendUvarint(b, uint64(len(id)))
			b = append(b, id...)
			return append(b, msg...), true
		}
	}
	return nil, false
}

func (f finalErrors) DecodeError(data []byte) error {
	n, w := binary.Uvarint(data)
	if w <= 0 || n > uint64(len(data)-w) {
		return &ReplayedError{Message: string(data)}
	}
	id, msg := string(data[w:w+int(n)]), string(data[w+int(n):])
	for _, target := range f.known {
		if target.Error() == id {
			return &ReplayedError{Message: msg, err: target}
		}
	}
	return &ReplayedError{Message: msg}
}

// ReplayedError is a final error replayed from the store.
type ReplayedError struct {
	// Message is the original error's text.
	Message string
	err     error // the registered error it matched, if still registered
}

// Error returns the original error's text.
func (e *ReplayedError) Error() string { return e.Message }

// Unwrap returns the registered final error the original matched, so
// errors.Is(replay, ErrDeclined) holds when errors.Is(original, ErrDeclined)
// did.
func (e *ReplayedError) Unwrap() error { return e.err }
