package app

// ExitError is an error that ends a command of the binary with its code; the offline
// commands use 1 for what they found (an enforced violation, a failed simulation) and 2
// for input they cannot read.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError makes cobra's own errors (unknown flags, bad flag values, arguments, missing
// required flags) end the command with 2, as input it cannot read does: cobra returns
// them as plain errors, which main would end with 1, the code CI reads as "failed".
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: 2, Err: err}
}
