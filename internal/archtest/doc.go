// Package archtest holds no code, only tests that keep the architecture of
// DESIGN.md true: the protocol packages and engines stay sans-I/O, imports
// between the project's packages point down the layer diagram, and the
// simulator's placement pulls in no daemon (logger, metrics, sockets).
package archtest
