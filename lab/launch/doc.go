// Package launch starts a fabric's processes, trimswitch and forgived, as
// children of the calling process, waits until each is ready, watches
// them, and stops them all: on request, on error, when one dies, and (by
// the kernel's parent-death signal) when the caller itself dies, so a
// run leaves no orphans.
package launch
