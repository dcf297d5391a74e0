// Package integration holds end-to-end tests that run the real binaries,
// trimswitch and forgived, as processes on loopback, and drive them
// through the host API as applications do.
package integration
