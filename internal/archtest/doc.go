// Package archtest holds no code, only tests that keep the architecture of
// DESIGN.md true: the protocol packages and engines stay sans-I/O, and
// imports between the project's packages point down the layer diagram.
package archtest
