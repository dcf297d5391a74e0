// Package launch starts a fabric's processes, trimswitch and forgived, as
// children of the calling process, waits until each is ready, watches
// them, and stops them all: on request, on error, when one dies, and (by
// the kernel's parent-death signal) when the caller itself dies, so a
// run leaves no orphans.
//
// A Spec with Netns runs in that network namespace: it is started as
// `forgivectl netns-exec NAME -- PATH ARGS...`, whose helper enters the
// namespace on its locked thread and execs PATH in its own place. Exec
// keeps the pid and the parent-death signal, so the group watches, stops
// and kills the daemon itself, and the daemon needs no namespace code. A
// helper process was chosen over entering the namespace in this process
// before fork: that would tie the children's parent-death signal to a
// thread that had changed namespace, and put namespace code in every
// caller.
package launch
