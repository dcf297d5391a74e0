// Package netns makes a netns placement real (lab/topo's NetnsLayout):
// it creates the named network namespaces, the veth pairs between them,
// their addresses, aliases and routes, and removes all of it again,
// processes included, through the kernel's netlink interface
// (github.com/vishvananda/netlink and netns; it never runs `ip`).
//
// # Names
//
// Every namespace and veth a run creates starts with "fgv-" and the run's
// id ("fgv-k3x9a1-leaf1", "fgv-k3x9a1-4a"), and namespaces are bind
// mounts under /run/netns, so `ip netns list` shows them and Cleanup
// finds what a crashed run left behind: it kills the processes inside
// (found by the namespace inode of /proc/PID/ns/net), deletes the veths
// and unmounts the namespaces. Create clears its own prefix first.
//
// # Entering a namespace
//
// A namespace is a property of an OS thread, so every function that
// enters one (Do, Dial, HTTPClient) runs on a goroutine locked to its
// thread, and returns the thread to the runtime only once it is back in
// its original namespace; a thread that cannot go back exits with its
// goroutine. Exec enters a namespace and replaces the process, which is
// how `forgivectl netns-exec` starts a daemon inside one (package
// lab/launch, Spec.Netns).
//
// # What it must not import
//
// The protocol packages, the engines and the daemons: it knows
// namespaces, links and processes, not what runs in them. It reads
// lab/topo's layout types only.
package netns
