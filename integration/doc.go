// Package integration holds end-to-end tests that run the real binaries,
// trimswitch and forgived, as processes on loopback, and drive them
// through the host API as applications do.
//
// Besides transfers, robustness and the CLI, the tests pin FORGIVE's
// behaviour on real daemons, each written so that it fails when the
// behaviour breaks: an exhausted budget makes an exempt sender obey until
// a later report clears the flag, and outstanding returns to zero
// (forgive_test.go); non-gradient traffic on an open step is never
// forgiven; an exempt sender cuts on neither CNPs nor NACKs; a gradient-norm
// trace makes its step critical at every rank (norms_test.go); the path
// policies spread flows over two spines as they promise (entropy_test.go);
// losses a trim never reports are found by probes and gaps (loss_test.go).
package integration
