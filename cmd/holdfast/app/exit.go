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
