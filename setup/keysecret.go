package setup

import (
	"bytes"
	"fmt"
	"os"

	"github.com/idemkit/idemkit"
)

// The environment variables that give the key secret
// (idemkit.WithKeySecret): the secret itself as text, or the path of a
// file holding it. Every program of the project reads the same two, so a
// service, its sidecar and idemctl name their keys alike.
const (
	EnvKeySecret     = "IDEMKIT_KEY_SECRET"
	EnvKeySecretFile = "IDEMKIT_KEY_SECRET_FILE"
)

// LoadKeySecret returns the key secret given as text (the value of
// IDEMKIT_KEY_SECRET, used as it is) or in the file at path (the value of
// IDEMKIT_KEY_SECRET_FILE; one trailing "\n" or "\r\n" removed), and nil
// when both are empty. Giving both, an unreadable file and a secret
// shorter than idemkit.MinKeySecretLen bytes are errors wrapping
// ErrConfig; no error holds the secret.
func LoadKeySecret(text, path string) ([]byte, error) {
	var secret []byte
	switch {
	case text != "" && path != "":
		return nil, fmt.Errorf("%w: give the key secret by %s or by a file (%s), not both", ErrConfig, EnvKeySecret, EnvKeySecretFile)
	case text != "":
		secret = []byte(text)
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: key secret file: %w", ErrConfig, err)
		}
		secret = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	default:
		return nil, nil
	}
	if err := checkKeySecret(secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// checkKeySecret refuses a set secret shorter than idemkit.MinKeySecretLen.
func checkKeySecret(secret []byte) error {
	if secret != nil && len(secret) < idemkit.MinKeySecretLen {
		return fmt.Errorf("%w: the key secret must have at least %d bytes, got %d", ErrConfig, idemkit.MinKeySecretLen, len(secret))
	}
	return nil
}
