// Command shardedcache is an operator's tool for a fleet of Redis or
// memcached shards placed by shardedcache's ring: it shows each shard's
// exact share and where keys live, plans a change of the shard list, finds
// and settles keys held by a shard that does not own them, runs a
// resharding with a progress bar and a checkpoint to resume from (or, with
// --etcd, drives the change of a fleet whose processes joined it: package
// fleet), moves a fleet into Redis Cluster, and shows the servers' counters.
//
//	go install github.com/shardedcache/shardedcache/cmd/shardedcache@latest
//
// It is a module of its own, which requires the SDK's and fleet/etcdstore's
// modules (no replace directives); in a checkout, its go.work uses theirs.
//
// Every subcommand reads a shard list (YAML or JSON): the backend, the
// shards (name, address, DB, weight), the placement preset and its
// settings, and the options the shards share. Passwords come from an
// environment variable or a file the list names, never from the list
// itself, and no output prints one. See docs/cli.md for the format and a
// sample session.
//
// Exit codes: 0 when all is well; 1 for findings (check found keys on a
// shard that does not own them, or left some unsettled); 2 for a usage or
// shard-list error (the message names the argument or field); 3 when an
// operation failed (a server could not be reached, a migration left keys
// behind).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1
	exitUsage    = 2
	exitFailed   = 3
)

// errFindings is returned by a subcommand whose report found something to
// act on (exit code 1); the report itself is the output.
var errFindings = errors.New("findings reported")

// opError is an operation that failed (exit code 3).
type opError struct{ err error }

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// failed marks err, unless nil or already a shard-list error, as an
// operation's failure.
func failed(err error) error {
	var ce *configError
	if err == nil || errors.As(err, &ce) || errors.Is(err, errFindings) {
		return err
	}
	return &opError{err}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var oe *opError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errFindings):
		return exitFindings
	case errors.As(err, &oe):
		fmt.Fprintln(stderr, "shardedcache:", err)
		return exitFailed
	}
	fmt.Fprintln(stderr, "shardedcache:", err) // a shard-list or usage error
	return exitUsage
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "shardedcache",
		Short: "Inspect, check and reshard a fleet of Redis or memcached shards placed by shardedcache",
		Long: `shardedcache reads a shard list (YAML or JSON) and works on its fleet.
The list's format and a sample session: docs/cli.md in
https://github.com/shardedcache/shardedcache.

Exit codes: 0 fine; 1 findings (stray keys found or left); 2 usage or
shard-list error; 3 an operation failed (a server unreachable, keys left
behind by a migration).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return configErrorf("%s: %v", c.CommandPath(), err)
	})
	root.AddCommand(sharesCmd(), locateCmd(), planCmd(), checkCmd(), reshardCmd(), toClusterCmd(), statsCmd())
	return root
}

// exactArgs is cobra.ExactArgs naming the arguments it wants.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return configErrorf("%s: want %d arguments (%v), got %d", c.CommandPath(), len(names), names, len(args))
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs naming the arguments it wants.
func minArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return configErrorf("%s: want at least %d arguments (%v), got %d", c.CommandPath(), len(names), names, len(args))
		}
		return nil
	}
}

// withFleet loads the shard list at path, opens it, runs fn and closes it.
func withFleet(path string, fn func(*fleet) error) error {
	l, err := loadList(path)
	if err != nil {
		return err
	}
	f, err := openFleet(l)
	if err != nil {
		return err
	}
	defer f.Close()
	return failed(fn(f))
}
