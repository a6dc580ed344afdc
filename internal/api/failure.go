package api

// SuppressRestartsError is a failure that no restart can mend, so the
// restart strategy is not asked: the job fails at once (Flink's
// SuppressRestartsException). A sink that cannot commit a committable of a
// completed checkpoint is the typical case: every restart would restore the
// same checkpoint and fail on the same committable.
type SuppressRestartsError struct{ Err error }

func (e *SuppressRestartsError) Error() string { return e.Err.Error() }
func (e *SuppressRestartsError) Unwrap() error { return e.Err }

// SuppressRestarts marks err as a failure that must not be retried.
func SuppressRestarts(err error) error {
	if err == nil {
		return nil
	}
	return &SuppressRestartsError{Err: err}
}
