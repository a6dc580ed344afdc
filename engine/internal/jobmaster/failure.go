package jobmaster

import (
	"errors"

	"github.com/gflink/gflink/internal/api"
)

// restartsSuppressed reports whether cause carries a SuppressRestartsError.
func restartsSuppressed(cause error) bool {
	var s *api.SuppressRestartsError
	return errors.As(cause, &s)
}
