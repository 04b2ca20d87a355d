// Package differential holds no code: its tests (package
// differential_test) run the same random script of commands (the families
// of fixtures/script*.go) against one server and against the sharded
// client, and compare the replies: on miniredis and on real redis-servers.
// Replay a seed with
//
//	go test -race -run Differential ./integration_test/differential -seed 42
package differential
