package idemkit

import "encoding/json"

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

// FinalErrors returns an ErrorCodec that treats an error as final when
// isFinal says so, stores its message, and replays it as a *ReplayedError.
func FinalErrors(isFinal func(error) bool) ErrorCodec {
	return finalErrors(isFinal)
}

type finalErrors func(error) bool

func (f finalErrors) EncodeError(err error) ([]byte, bool) {
	if !f(err) {
		return nil, false
	}
	return []byte(err.Error()), true
}

func (f finalErrors) DecodeError(data []byte) error {
	return &ReplayedError{Message: string(data)}
}

// ReplayedError is a final error replayed from the store by the
// FinalErrors codec.
type ReplayedError struct {
	// Message is the original error's text.
	Message string
}

// Error returns the original error's text.
func (e *ReplayedError) Error() string { return e.Message }
