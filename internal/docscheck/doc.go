// Package docscheck holds no code: its tests check the repository's
// documentation (README.md and docs/*.md) against the code. Every ```go
// block is a copy of part of an Example function (a file named
// example*_test.go) or of a program under examples/, so that every snippet
// compiles, and the examples run on embedded servers run in CI; every
// relative link leads to a file that exists; and the commands the README's
// first lines give are those .ci/run runs.
package docscheck
