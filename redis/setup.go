package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// shardHook is on every shard's client. It drops the keys that a command
// writes from the process's caches of the shard's server once the server
// answered (serverCaches.dropWritten; see cache.go), a command that failed
// included (a write whose reply was lost may have run). And it marks a
// server's refusal to set up a connection as the shard's failure: go-redis
// sets up each new connection with commands of its own (HELLO, AUTH,
// SELECT, READONLY, CLIENT SETNAME, CLIENT TRACKING), run through the
// client's hooks, and when the server refuses one it returns that reply
// error, bare, for the command that needed the connection:
// indistinguishable from the command's own reply. The hook marks such a
// refusal as a *setupError, so that classify counts it as the shard's
// failure. On a fleet's client it also marks a command that lost its
// connection to the fleet's fence as a *FenceClosedError (fenceProbe), not
// the shard's failure. One hook does all, so that a command pays one
// hook's call; being on the shard's client, it serves every path to the
// shard: the router's, autopipelined batches (run inside the client's
// pipeline hooks), Watch, GetShard and ForEachShard.
type shardHook struct {
	caches *serverCaches
	fence  *fenceWatch // a fleet's client only: see FenceClosedError
}

func (shardHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h shardHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h.caches.dropWritten(cmd)
		if err == nil {
			return nil
		}
		if se := setupFailure(cmd, err); se != nil {
			return se
		}
		probe := fenceProbe{watch: h.fence}
		return probe.closed(ctx, err)
	}
}

// ProcessPipelineHook serves pipelines and transactions (MULTI and EXEC
// write no key). It marks the refusals in a pipeline (go-redis sends
// SELECT, READONLY and CLIENT SETNAME as one), and the commands the fence
// closed (asking the server once for all of them), and then returns the
// first command error, as go-redis's own pipeline does. A pipeline (or
// transaction) whose connection could not be set up ran no command, yet
// go-redis leaves its commands without an error (it gives them transport
// errors only): they get the setup error.
func (h shardHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.caches.dropWritten(cmd)
		}
		switch {
		case err == nil:
			return nil
		case firstErr(cmds) == nil && isSetupError(err):
			return setErrs(cmds, err)
		}
		marked := false
		probe := fenceProbe{watch: h.fence}
		for _, cmd := range cmds {
			if se := setupFailure(cmd, cmd.Err()); se != nil {
				cmd.SetErr(se)
				marked = true
			} else if fc, ok := probe.closed(ctx, cmd.Err()).(*FenceClosedError); ok {
				cmd.SetErr(fc)
				marked = true
			}
		}
		if marked {
			return firstErr(cmds)
		}
		return err
	}
}

// setupFailure returns err as a *setupError when it is the server's refusal
// of a command that sets up connections, else nil.
func setupFailure(cmd goredis.Cmder, err error) error {
	if err == nil || !isReplyError(err) {
		return nil
	}
	switch name := cmd.Name(); name {
	case "client":
		if args := cmd.Args(); len(args) > 1 {
			switch sub := strings.ToLower(fmt.Sprint(args[1])); sub {
			case "setname", "setinfo", "tracking", "maint_notifications":
				return &setupError{command: name + " " + sub, err: err}
			}
		}
		// Another CLIENT command (KILL, UNBLOCK, ...) is not connection
		// setup: its error is the server's answer.
	case "hello", "auth", "select", "readonly":
		return &setupError{command: name, err: err}
	}
	return nil
}

// setupError is a server's refusal to set up a connection (wrong password,
// unknown ACL user, DB out of range, invalid client name, ...). It wraps the
// reply, so that errors.As and redis.IsAuthError see through it.
type setupError struct {
	command string // "auth", "select", "client setname", ...
	err     error
}

func (e *setupError) Error() string {
	return "connection setup (" + e.command + "): " + e.err.Error()
}

func (e *setupError) Unwrap() error { return e.err }

// isSetupError reports whether err is a refusal to set up a connection: one
// that setupHook marked, or an authentication error (a server that needs a
// password the shard's options lack refuses every command with NOAUTH).
func isSetupError(err error) bool {
	var se *setupError
	return errors.As(err, &se) || goredis.IsAuthError(err)
}
