package fleet

// An exhaustive model check of the fleet protocol (see doc.go) and of the
// server-side scripts of package redis (fleetmove.go, fleet.go), as an
// explicit state machine: every interleaving of two processes, a driver
// (and a paused driver whose actions land late), a source S and a
// destination D, with messages that servers run in any order across
// connections (in order on one), connections that a fence kills, and a
// destination that hangs (a message to it times out at its client and may
// still run later, or never). No I/O: the search is breadth-first over all
// reachable states, with a visited set of 128-bit hashes of the states.
//
// The checker (the property, apart from the protocol):
//
//   - per key, a register of writes with distinct values (a delete writes
//     "absent"): a write is invoked, then acknowledged or not (an error: its
//     outcome is unknown, it may land at any time later). A read that
//     starts after a write w was acknowledged (or after another read
//     returned w) must not return a value x whose write was acknowledged
//     before w was invoked (x is older than w: a lost acknowledged write, a
//     stale read, or, when w is a delete, a resurrected delete); a read of
//     "absent" needs a delete that no such w follows;
//   - nothing writes a moving key on its source once that server is marked
//     moved (the doc's "a key that has left its source never comes back");
//   - in a final state (nothing left to run anywhere): the store holds
//     Stable(T), no moving key is on its source, no mark is left, no key is
//     on a server other than its owner under T, and a read of each key on
//     its owner passes the register check with everything acknowledged.
//
// Negative controls run the same checker on broken variants of the
// protocol and require it to find a counterexample.

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"os"
	"strings"
	"testing"
	"time"
)

const (
	srvS, srvD = 0, 1
	nSrv       = 2
	nKey       = 2
	nProc      = 2
	nActor     = nProc + 2 // the processes, the driver, a paused driver (zombie)
	drvA       = nProc
	zomA       = nProc + 1
	maxOrph    = 4
	maxWrites  = 16 // write IDs are bits of a uint16
)

// The epochs of the four steps: Stable(L)=1, Preparing=2, Moving=3, Stable(T)=4;
// step j (0..3) has epoch j+1; the sources are fenced at the Moving epoch.
const fenceEpoch = 3

// Message operations (one server-side step each).
const (
	opNone int8 = iota
	opGet
	opSet
	opDel
	opMark    // markScript: busy / gone / mark and dump
	opRestore // restoreScript: unless revoked, RESTORE REPLACE and record restored
	opFinish  // finishScript "finish": delete key and mark if the mark is the token
	opAbort   // finishScript "abort": delete the mark if it is the token
	opSettle  // settleScript: restored, else revoke
	opScan    // the driver finds whether a key is on a server (SCAN)
	opHkeys   // the driver lists the marks of a source (HKEYS)
	opDrop    // dropStaleScript
	opRaise   // raiseFenceScript
	opKill    // CLIENT KILL of fleet connections named with an older epoch
	opMoved   // HSET fence moved <change>
)

var opNames = [...]string{"-", "GET", "SET", "DEL", "MARK", "RESTORE", "FINISH", "ABORT", "SETTLE", "SCAN", "HKEYS", "DROPSTALE", "RAISEFENCE", "KILLOLDER", "MARKMOVED"}

// Reply kinds.
const (
	rOK int8 = iota
	rErr     // no reply: a killed connection or a timeout (unknown outcome)
	rRefused // the fence refused the connection
	rNotMoved
	rGone
	rBusy
	rDump
	rRevoked
	rRestored
	rVal
	rNeg // dropStaleScript's -1
)

type reply struct{ kind, v int8 }

// msg is one message to a server. lab is its connection's epoch (0: an
// admin connection, unnamed, never fenced).
type msg struct{ op, srv, key, arg, arg2, lab int8 }

// Command sub-states of an actor (a process's command, or the driver).
const (
	csIdle int8 = iota
	csOp        // the command itself is in flight
	csMark
	csRestore
	csSettleOwn // settling its own token after the RESTORE failed
	csFinish    // finishing its own move
	csAbortAgain
	csAbortFail
	csSettleBusy
	csFinishBusy
	csAbortBusy
	csFenced // refused by a fence: waits for a newer state
	csDrv    // a driver's admin message is in flight
)

// Driver steps.
const (
	dPrep int8 = iota
	dDrop
	dFence
	dSwapMoving
	dMigrate
	dSettle
	dSwapStable
	dDone
)

type actor struct {
	pc, cs         int8
	key            int8
	tok, btok, val int8
	failed         bool
	view           int8    // the step a process's command routes by
	vlab           [2]int8 // the connection epochs of that view
	m              msg     // pending message (op == opNone: none)
	phase          int8    // 0, 1: connecting (name, fence check); 2: the operation
	rsnap          uint16  // a read's snapshot of the acknowledged writes
	di, dsub       int8    // driver loop indexes
	dmask          int8    // driver: marked keys to settle
	dpass          bool    // driver: marks found in this pass
	tag            int8    // driver: what the admin message is for
}

type conn struct{ lab, st int8 } // st: 0 none, 1 named, 2 live (checked)

type proc struct {
	applied int8
	lab     [nSrv]int8
	gone    [nKey]bool
	conn    [nSrv]conn
}

type server struct {
	val               [nKey]int8 // write ID, 0: absent
	mark              [nKey]int8 // token, 0: none
	fence             int8
	moved             bool
	restored, revoked uint16
}

type state struct {
	store      int8 // the step stored: 0..3
	srv        [nSrv]server
	a          [nActor]actor
	p          [nProc]proc
	orph       [maxOrph]msg // late messages (their client gave up), sorted
	tok        int8         // tokens used
	timeouts   int8         // timeouts used
	zombies    int8         // driver pauses used
	known      [nKey]uint16 // writes known to have taken effect
	prior      [maxWrites]uint16
	invoked    uint16
	viol       int8
	violDetail int8
}

// Violations.
const (
	vNone int8 = iota
	vStaleRead
	vLostDelete // a read of "absent" with no delete it could come from
	vSourceWrite
	vLeftOnSource
	vMarkLeft
	vExtraCopy
	vFinalRead
	vStuck
	vDriverRefused
)

var violNames = [...]string{"", "stale read or lost acknowledged write (or resurrected delete)", "read of absent with no delete it may come from (lost write)",
	"a moving key was written on its source after the source was marked moved", "a moving key is left on its source at Stable(T)",
	"a move mark is left at Stable(T)", "a key is on a server that does not own it at Stable(T)", "the final value of a key is stale or lost",
	"a final state that is not Stable(T)", "a driver's removal of stale copies was refused (it could not go on)"}

// Protocol variants (the negative controls break one thing each).
type bug uint16

const (
	bugNoFence bug = 1 << iota
	bugKillBeforeRaise
	bugRestoreIgnoresRevoke
	bugNoMark
	bugCheckBeforeName
	bugSettleNoRevoke
	bugDropUnguarded
)

type opKind struct{ kind, key int8 }

type model struct {
	name           string
	ownerL, ownerT [nKey]int8
	hang           [nSrv]bool // servers whose messages may time out
	maxTimeouts    int8
	maxZombies     int8
	maxTok         int8
	progs          [nProc][]opKind
	bugs           bug
	maxStates      int

	// derived
	wid      [nProc][]int8 // write ID of each program op (0 for reads)
	wkey     [maxWrites]int8
	wdel     [maxWrites]bool
	nw       int8
	stale    int8 // the stale copy of k1 on D
	initial  [nKey]int8
	moving   [nKey]bool
	isSource [nSrv]bool
}

func (md *model) prepare() state {
	var s state
	md.nw = 1
	newID := func(key int8, del bool) int8 {
		id := md.nw
		md.nw++
		md.wkey[id], md.wdel[id] = key, del
		return id
	}
	md.stale = newID(0, false)
	for k := range int8(nKey) {
		md.initial[k] = newID(k, false)
		md.moving[k] = md.ownerL[k] != md.ownerT[k]
		if md.moving[k] {
			md.isSource[md.ownerL[k]] = true
		}
	}
	for p := range nProc {
		md.wid[p] = make([]int8, len(md.progs[p]))
		for i, o := range md.progs[p] {
			if o.kind != opGet {
				md.wid[p][i] = newID(o.key, o.kind == opDel)
			}
		}
	}
	if md.nw > maxWrites {
		panic("too many writes")
	}
	// S holds both keys; D holds a stale copy of k1 (a leftover of an
	// earlier change) that the driver must remove before moves begin.
	for k := range int8(nKey) {
		s.srv[md.ownerL[k]].val[k] = md.initial[k]
		s.known[k] = 1 << md.initial[k]
	}
	s.srv[md.ownerT[0]].val[0] = md.stale
	s.prior[md.initial[0]] = 1 << md.stale
	for p := range nProc {
		s.p[p].applied = 0
		s.p[p].lab = [nSrv]int8{1, 1}
	}
	s.a[zomA].pc = dDone
	return s
}

// action names a transition, for counterexample traces.
type action struct{ kind, who, x, y int8 }

const (
	aStart int8 = iota
	aLearn
	aGiveUp
	aExec
	aExecLost
	aTimeout
	aOrphan
	aDriver
	aPause
	aRetryBusy
	aSettleBusy
)

func (md *model) describe(s *state, act action) string {
	who := fmt.Sprintf("P%d", act.who)
	if act.who == drvA {
		who = "driver"
	} else if act.who == zomA {
		who = "paused driver"
	}
	m := s.a[act.who].m
	msgStr := func(m msg) string {
		return fmt.Sprintf("%s(k%d,%d,%d) on %c epoch %d", opNames[m.op], m.key+1, m.arg, m.arg2, "SD"[m.srv], m.lab)
	}
	phase := func() string {
		switch {
		case act.who >= drvA || s.a[act.who].phase == 2:
			return msgStr(m)
		case s.a[act.who].phase == 0 && md.bugs&bugCheckBeforeName == 0, s.a[act.who].phase == 1 && md.bugs&bugCheckBeforeName != 0:
			return fmt.Sprintf("SETNAME epoch %d on %c (for %s)", m.lab, "SD"[m.srv], opNames[m.op])
		default:
			return fmt.Sprintf("fence check epoch %d on %c (for %s)", m.lab, "SD"[m.srv], opNames[m.op])
		}
	}
	switch act.kind {
	case aStart:
		o := md.progs[act.who][s.a[act.who].pc]
		return fmt.Sprintf("%s starts %s k%d (write id %d) routed by step %d", who, opNames[o.kind], o.key+1, md.wid[act.who][s.a[act.who].pc], s.p[act.who].applied)
	case aLearn:
		return fmt.Sprintf("%s applies step %d", who, act.x)
	case aGiveUp:
		return who + " gives up waiting for a newer state"
	case aExec:
		return fmt.Sprintf("%c runs %s's %s", "SD"[m.srv], who, phase())
	case aExecLost:
		return fmt.Sprintf("%c runs %s's %s; the reply is lost (timeout)", "SD"[m.srv], who, phase())
	case aTimeout:
		return fmt.Sprintf("%s times out on %s (it may still run later)", who, phase())
	case aOrphan:
		return fmt.Sprintf("%c runs a late %s", "SD"[s.orph[act.x].srv], msgStr(s.orph[act.x]))
	case aDriver:
		return fmt.Sprintf("%s takes step %d (store at %d)", who, s.a[act.who].pc, s.store)
	case aPause:
		return "the driver pauses (a new driver resumes; the paused one goes on later)"
	case aRetryBusy:
		return who + " finds the key marked: waits and retries"
	case aSettleBusy:
		return who + " finds the key marked: settles the old mark"
	}
	return "?"
}

// ---- the server side ----

func (md *model) exec(s *state, m msg) reply {
	sv := &s.srv[m.srv]
	k := m.key
	switch m.op {
	case opGet:
		return reply{rVal, sv.val[k]}
	case opSet, opDel:
		if md.moving[k] && md.ownerL[k] == m.srv && sv.moved {
			s.setViol(vSourceWrite, k)
		}
		if m.op == opSet {
			sv.val[k] = m.arg
		} else {
			sv.val[k] = 0
		}
		return reply{rOK, 0}
	case opMark:
		if !sv.moved {
			return reply{rNotMoved, 0}
		}
		if md.bugs&bugNoMark == 0 && sv.mark[k] != 0 {
			return reply{rBusy, sv.mark[k]}
		}
		if sv.val[k] == 0 {
			return reply{rGone, 0}
		}
		if md.bugs&bugNoMark == 0 {
			sv.mark[k] = m.arg
		}
		return reply{rDump, sv.val[k]}
	case opRestore:
		if md.bugs&bugRestoreIgnoresRevoke == 0 && sv.revoked&(1<<m.arg) != 0 {
			return reply{rRevoked, 0}
		}
		sv.val[k] = m.arg2
		sv.restored |= 1 << m.arg
		return reply{rOK, 0}
	case opFinish, opAbort:
		if md.bugs&bugNoMark != 0 {
			if m.op == opFinish {
				sv.val[k] = 0
			}
			return reply{rOK, 0}
		}
		if sv.mark[k] == m.arg {
			sv.mark[k] = 0
			if m.op == opFinish {
				sv.val[k] = 0
			}
		}
		return reply{rOK, 0}
	case opSettle:
		if sv.restored&(1<<m.arg) != 0 {
			return reply{rRestored, 0}
		}
		if md.bugs&bugSettleNoRevoke == 0 {
			sv.revoked |= 1 << m.arg
		}
		return reply{rRevoked, 0}
	case opScan:
		return reply{rVal, sv.val[k]}
	case opHkeys:
		var mask int8
		for kk := range int8(nKey) {
			if sv.mark[kk] != 0 {
				mask |= 1 << kk
			}
		}
		return reply{rVal, mask}
	case opDrop:
		if md.bugs&bugDropUnguarded == 0 && sv.moved {
			return reply{rNeg, 0}
		}
		sv.val[k] = 0
		return reply{rOK, 0}
	case opRaise:
		sv.fence = max(sv.fence, m.arg)
		return reply{rOK, 0}
	case opKill:
		md.kill(s, m.srv, m.arg)
		return reply{rOK, 0}
	case opMoved:
		sv.moved = true
		return reply{rOK, 0}
	}
	panic("unknown op")
}

// kill closes, on server sv, the named fleet connections of an epoch older
// than e: a message on one that has not run is dropped, its client gets an
// error.
func (md *model) kill(s *state, sv, e int8) {
	for p := range nProc {
		c := &s.p[p].conn[sv]
		if c.st == 0 || c.lab >= e {
			continue
		}
		*c = conn{}
		if a := &s.a[p]; a.m.op != opNone && a.m.srv == sv {
			a.m = msg{}
			md.onReply(s, p, reply{rErr, 0})
		}
	}
	var kept []msg
	for _, o := range s.orph {
		if o.op != opNone && !(o.srv == sv && o.lab > 0 && o.lab < e) {
			kept = append(kept, o)
		}
	}
	s.orph = [maxOrph]msg{}
	copy(s.orph[:], kept)
	s.sortOrph()
}

// sortOrph keeps the late messages in one order (the set is what
// matters), empty slots last.
func (s *state) sortOrph() {
	rank := func(m msg) uint64 {
		if m.op == opNone {
			return 1 << 63
		}
		var r uint64
		for _, b := range [...]int8{m.srv, m.op, m.key, m.arg, m.arg2, m.lab} {
			r = r<<8 | uint64(uint8(b))
		}
		return r
	}
	for i := 1; i < maxOrph; i++ {
		for j := i; j > 0 && rank(s.orph[j]) < rank(s.orph[j-1]); j-- {
			s.orph[j-1], s.orph[j] = s.orph[j], s.orph[j-1]
		}
	}
}

func (s *state) addOrph(m msg) {
	for i := range s.orph {
		if s.orph[i].op == opNone {
			s.orph[i] = m
			s.sortOrph()
			return
		}
	}
	panic("too many late messages: raise maxOrph")
}

func (s *state) setViol(v, detail int8) {
	if s.viol == vNone {
		s.viol, s.violDetail = v, detail
	}
}

// ---- the register checker ----

// checkRead checks a read of key that started when snap was acknowledged
// and returned x (a write ID, 0 for absent).
func (md *model) checkRead(s *state, key int8, snap uint16, x int8, v int8) {
	if x != 0 {
		for w := range md.nw {
			if snap&(1<<w) != 0 && w != x && s.prior[w]&(1<<x) != 0 {
				s.setViol(v, key)
				return
			}
		}
		s.known[key] |= 1 << x
		return
	}
	for d := range md.nw {
		if !md.wdel[d] || md.wkey[d] != key || s.invoked&(1<<d) == 0 {
			continue
		}
		ok := true
		for w := range md.nw {
			if snap&(1<<w) != 0 && w != d && s.prior[w]&(1<<d) != 0 {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	if v == vStaleRead {
		v = vLostDelete
	}
	s.setViol(v, key)
}

// ---- the client side ----

// send puts a message of actor i in flight: a process's on its connection
// of the command's view (a new one, named and checked first, unless a live
// one of that epoch is there), the driver's on an admin connection.
func (md *model) send(s *state, i int, m msg) {
	a := &s.a[i]
	if i >= drvA {
		m.lab = 0
		a.m, a.phase = m, 2
		return
	}
	m.lab = a.vlab[m.srv]
	a.m = m
	c := &s.p[i].conn[m.srv]
	if c.lab == m.lab && c.st == 2 {
		a.phase = 2
		return
	}
	*c = conn{lab: m.lab}
	a.phase = 0
}

// route sends a process's command (or, in Moving, first the move of its
// key) by the view it holds.
func (md *model) route(s *state, p int) {
	a := &s.a[p]
	o := md.progs[p][a.pc]
	a.key, a.failed = o.key, false
	switch {
	case a.view <= 1:
		md.send(s, p, msg{op: o.kind, srv: md.ownerL[o.key], key: o.key, arg: md.wid[p][a.pc]})
	case a.view == 2 && md.moving[o.key] && !s.p[p].gone[o.key]:
		md.startMove(s, p)
	default:
		md.send(s, p, msg{op: o.kind, srv: md.ownerT[o.key], key: o.key, arg: md.wid[p][a.pc]})
	}
}

// startMove begins one try of a move of actor i's key, with a new token.
func (md *model) startMove(s *state, i int) {
	a := &s.a[i]
	if s.tok >= md.maxTok {
		md.fail(s, i) // the bound of the model: as if the context ended
		return
	}
	s.tok++
	a.tok = s.tok
	a.cs = csMark
	md.send(s, i, msg{op: opMark, srv: md.ownerL[a.key], key: a.key, arg: a.tok})
}

func (md *model) moveDone(s *state, i int) {
	a := &s.a[i]
	if i >= drvA {
		a.cs = csIdle
		if a.failed {
			md.fail(s, i)
			return
		}
		if a.pc == dMigrate {
			a.di++
		}
		return
	}
	if a.failed {
		md.fail(s, i)
		return
	}
	s.p[i].gone[a.key] = true
	a.cs = csOp
	o := md.progs[i][a.pc]
	md.send(s, i, msg{op: o.kind, srv: md.ownerT[a.key], key: a.key, arg: md.wid[i][a.pc]})
}

// fail ends a process's command with an error (a write's outcome stays
// unknown), or makes the driver fail: a new one resumes from the stored
// step (a paused driver just stops).
func (md *model) fail(s *state, i int) {
	a := &s.a[i]
	a.m, a.cs, a.failed = msg{}, csIdle, false
	switch {
	case i < drvA:
		a.pc++
	case i == zomA:
		a.pc = dDone
	default:
		md.restartDriver(s)
	}
}

func (md *model) restartDriver(s *state) {
	a := &s.a[drvA]
	*a = actor{}
	a.pc = [...]int8{dPrep, dDrop, dMigrate, dDone}[s.store]
}

// onReply handles the reply to actor i's message (the message is done).
func (md *model) onReply(s *state, i int, r reply) {
	a := &s.a[i]
	a.m = msg{}
	src, dst := md.ownerL[a.key], md.ownerT[a.key]
	if r.kind == rRefused && a.cs != csOp {
		r.kind = rErr // a refused connection fails a move's step
	}
	switch a.cs {
	case csOp:
		switch r.kind {
		case rRefused:
			a.cs = csFenced
		case rErr:
			md.fail(s, i)
		default:
			o := md.progs[i][a.pc]
			if o.kind == opGet {
				md.checkRead(s, o.key, a.rsnap, r.v, vStaleRead)
			} else {
				s.known[o.key] |= 1 << md.wid[i][a.pc]
			}
			a.cs = csIdle
			a.pc++
		}
	case csMark:
		switch r.kind {
		case rErr, rNotMoved:
			a.cs = csAbortFail
			md.send(s, i, msg{op: opAbort, srv: src, key: a.key, arg: a.tok})
		case rGone:
			md.moveDone(s, i)
		case rBusy:
			a.btok = r.v // the caller chooses: wait (retry) or settle
			a.cs = csSettleBusy
		case rDump:
			a.val = r.v
			a.cs = csRestore
			md.send(s, i, msg{op: opRestore, srv: dst, key: a.key, arg: a.tok, arg2: a.val})
		}
	case csRestore:
		switch r.kind {
		case rOK:
			a.cs = csFinish
			md.send(s, i, msg{op: opFinish, srv: src, key: a.key, arg: a.tok})
		case rRevoked:
			a.cs = csAbortAgain
			md.send(s, i, msg{op: opAbort, srv: src, key: a.key, arg: a.tok})
		default:
			a.cs = csSettleOwn
			md.send(s, i, msg{op: opSettle, srv: dst, key: a.key, arg: a.tok})
		}
	case csSettleOwn:
		switch r.kind {
		case rRestored:
			a.cs = csFinish
			md.send(s, i, msg{op: opFinish, srv: src, key: a.key, arg: a.tok})
		case rRevoked:
			a.cs = csAbortFail
			md.send(s, i, msg{op: opAbort, srv: src, key: a.key, arg: a.tok})
		default:
			md.fail(s, i)
		}
	case csFinish:
		if r.kind == rErr {
			md.fail(s, i)
			return
		}
		md.moveDone(s, i)
	case csAbortAgain:
		if r.kind == rErr {
			a.failed = true
		}
		md.startMove(s, i)
	case csAbortFail:
		md.fail(s, i)
	case csSettleBusy:
		switch r.kind {
		case rRestored:
			a.cs = csFinishBusy
			md.send(s, i, msg{op: opFinish, srv: src, key: a.key, arg: a.btok})
		case rRevoked:
			a.cs = csAbortBusy
			md.send(s, i, msg{op: opAbort, srv: src, key: a.key, arg: a.btok})
		default:
			md.fail(s, i)
		}
	case csFinishBusy, csAbortBusy:
		if r.kind == rErr {
			md.fail(s, i)
			return
		}
		md.startMove(s, i)
	case csDrv:
		md.onDriverReply(s, i, r)
	}
}

// ---- the driver ----

// driverStep takes the driver's next step when nothing is in flight.
func (md *model) driverStep(s *state, i int) {
	a := &s.a[i]
	switch a.pc {
	case dPrep:
		if i == zomA || s.store != 0 {
			a.pc = dDone
			return
		}
		s.store = 1
		a.pc, a.di = dDrop, 0
	case dDrop: // the keys each destination gains: scan, then drop
		if a.di == nKey {
			a.pc, a.di, a.dsub = dFence, 0, 0
			return
		}
		if !md.moving[a.di] {
			a.di++
			return
		}
		a.cs, a.tag = csDrv, 0
		md.send(s, i, msg{op: opScan, srv: md.ownerT[a.di], key: a.di})
	case dFence:
		if a.di == nSrv {
			a.pc = dSwapMoving
			return
		}
		ops := md.fenceOps(a.di)
		a.cs = csDrv
		md.send(s, i, msg{op: ops[a.dsub], srv: a.di, arg: fenceEpoch})
	case dSwapMoving:
		if i == zomA || s.store != 1 {
			a.pc = dDone
			return
		}
		s.store = 2
		a.pc, a.di = dMigrate, 0
	case dMigrate:
		if a.di == nKey {
			a.pc, a.di, a.dpass, a.dmask = dSettle, 0, false, 0
			return
		}
		if !md.moving[a.di] {
			a.di++
			return
		}
		a.cs, a.tag = csDrv, 1
		md.send(s, i, msg{op: opScan, srv: md.ownerL[a.di], key: a.di})
	case dSettle:
		switch {
		case a.dmask != 0:
			k := int8(bits.TrailingZeros8(uint8(a.dmask)))
			a.dmask &^= 1 << k
			a.key = k
			md.startMove(s, i)
		case a.di == nSrv && a.dpass:
			a.di, a.dpass = 0, false
		case a.di == nSrv:
			a.pc = dSwapStable
		case !md.isSource[a.di]:
			a.di++
		default:
			a.cs = csDrv
			md.send(s, i, msg{op: opHkeys, srv: a.di})
		}
	case dSwapStable:
		if i == zomA || s.store != 2 {
			a.pc = dDone
			return
		}
		s.store = 3
		a.pc = dDone
	}
}

func (md *model) fenceOps(sv int8) []int8 {
	switch {
	case !md.isSource[sv] || md.bugs&bugNoFence != 0:
		return []int8{opMoved}
	case md.bugs&bugKillBeforeRaise != 0:
		return []int8{opKill, opRaise, opMoved}
	}
	return []int8{opRaise, opKill, opMoved}
}

func (md *model) onDriverReply(s *state, i int, r reply) {
	a := &s.a[i]
	a.cs = csIdle
	if r.kind == rErr {
		md.fail(s, i)
		return
	}
	switch a.pc {
	case dDrop:
		switch {
		case r.kind == rNeg:
			if i == drvA {
				s.setViol(vDriverRefused, a.di)
			}
			md.fail(s, i)
		case a.tag == 0 && r.v != 0: // the stale copy is there: drop it
			a.cs, a.tag = csDrv, 2
			md.send(s, i, msg{op: opDrop, srv: md.ownerT[a.di], key: a.di})
		default:
			a.di++
		}
	case dFence:
		a.dsub++
		if int(a.dsub) == len(md.fenceOps(a.di)) {
			a.di, a.dsub = a.di+1, 0
		}
	case dMigrate:
		if r.v == 0 {
			a.di++
			return
		}
		a.key = a.di
		md.startMove(s, i)
	case dSettle:
		a.dmask = r.v
		if r.v != 0 {
			a.dpass = true
		}
		a.di++
	}
}

// ---- learning the store's state ----

// learn makes process p apply step j, relabelling its connections as
// fleetBackend.Apply does.
func (md *model) learn(s *state, p int, j int8) {
	pr := &s.p[p]
	next := j == pr.applied+1
	e := j + 1
	switch j {
	case 1: // Preparing after Stable(L): the routing and the clients stay
	case 2:
		for sv := range int8(nSrv) {
			if !next || md.isSource[sv] {
				pr.lab[sv] = e
			}
		}
	case 3:
		if !next {
			pr.lab = [nSrv]int8{e, e}
		}
	}
	pr.applied = j
	pr.gone = [nKey]bool{}
}

// ---- successors ----

func (md *model) successors(s *state, emit func(state, action)) {
	if a := &s.a[drvA]; a.pc != dDone && s.zombies < md.maxZombies && s.a[zomA].pc == dDone {
		md.pause(s, emit)
	}
	for i := range nActor {
		a := &s.a[i]
		if a.m.op != opNone {
			md.msgSuccessors(s, i, emit)
			continue
		}
		if a.cs == csSettleBusy && a.btok != 0 && a.m.op == opNone {
			// A busy key: wait for the mark's mover (try again), or settle it.
			n := *s
			n.a[i].btok = 0
			md.startMove(&n, i)
			emit(n, action{aRetryBusy, int8(i), 0, 0})
			n = *s
			b := &n.a[i]
			md.send(&n, i, msg{op: opSettle, srv: md.ownerT[b.key], key: b.key, arg: b.btok})
			emit(n, action{aSettleBusy, int8(i), 0, 0})
			continue
		}
		if i < drvA {
			md.procSuccessors(s, i, emit)
			continue
		}
		if a.pc == dDone {
			continue
		}
		n := *s
		md.driverStep(&n, i)
		emit(n, action{aDriver, int8(i), 0, 0})
	}
	for o := range s.orph {
		if s.orph[o].op == opNone {
			break
		}
		n := *s
		m := n.orph[o]
		n.orph[o] = msg{}
		n.sortOrph()
		md.exec(&n, m)
		emit(n, action{aOrphan, 0, int8(o), 0})
	}
}

func (md *model) pause(s *state, emit func(state, action)) {
	n := *s
	n.zombies++
	n.a[zomA] = n.a[drvA]
	md.restartDriver(&n)
	emit(n, action{aPause, drvA, 0, 0})
}

func (md *model) procSuccessors(s *state, p int, emit func(state, action)) {
	a := &s.a[p]
	pr := &s.p[p]
	if (a.cs == csIdle && int(a.pc) < len(md.progs[p])) || a.cs == csFenced {
		for j := pr.applied + 1; j <= s.store; j++ {
			n := *s
			md.learn(&n, p, j)
			if a.cs == csFenced { // the command runs again by the new state
				b := &n.a[p]
				b.cs, b.view, b.vlab = csOp, n.p[p].applied, n.p[p].lab
				md.route(&n, p)
			}
			emit(n, action{aLearn, int8(p), j, 0})
		}
	}
	switch {
	case a.cs == csFenced:
		n := *s
		md.fail(&n, p)
		emit(n, action{aGiveUp, int8(p), 0, 0})
	case a.cs == csIdle && int(a.pc) < len(md.progs[p]):
		n := *s
		b := &n.a[p]
		o := md.progs[p][b.pc]
		if o.kind == opGet {
			b.rsnap = n.known[o.key]
		} else {
			w := md.wid[p][b.pc]
			n.invoked |= 1 << w
			n.prior[w] = n.known[o.key]
		}
		b.cs, b.view, b.vlab = csOp, pr.applied, pr.lab
		md.route(&n, p)
		emit(n, action{aStart, int8(p), 0, 0})
	}
}

// msgSuccessors: the server runs the next part of actor i's message (and
// the actor handles the reply at once: a client's own steps are invisible
// to others until its next message runs), or the actor times out.
func (md *model) msgSuccessors(s *state, i int, emit func(state, action)) {
	a := &s.a[i]
	m := a.m
	n := *s
	if a.phase < 2 {
		c := &n.p[i].conn[m.srv]
		b := &n.a[i]
		named := (a.phase == 0) != (md.bugs&bugCheckBeforeName != 0)
		if named {
			c.st = 1
			if md.bugs&bugCheckBeforeName != 0 {
				c.st = 2
			}
			b.phase++
		} else if m.lab < n.srv[m.srv].fence {
			*c = conn{}
			md.onReply(&n, i, reply{rRefused, 0})
		} else {
			if md.bugs&bugCheckBeforeName == 0 {
				c.st = 2
			}
			b.phase++
		}
		emit(n, action{aExec, int8(i), 0, 0})
	} else {
		md.onReply(&n, i, md.exec(&n, m))
		emit(n, action{aExec, int8(i), 0, 0})
	}
	if !md.hang[m.srv] || s.timeouts >= md.maxTimeouts {
		return
	}
	// Timeouts: the client closes the connection and gets an error; the
	// message, if the server has not run it, may still run later.
	n = *s
	n.timeouts++
	if i < drvA {
		n.p[i].conn[m.srv] = conn{}
	}
	if a.phase == 2 {
		n.addOrph(m)
	}
	md.onReply(&n, i, reply{rErr, 0})
	emit(n, action{aTimeout, int8(i), 0, 0})
	if a.phase == 2 {
		n = *s
		n.timeouts++
		if i < drvA {
			n.p[i].conn[m.srv] = conn{}
		}
		md.exec(&n, m)
		md.onReply(&n, i, reply{rErr, 0})
		emit(n, action{aExecLost, int8(i), 0, 0})
	}
}

// final checks a state where nothing can run any more.
func (md *model) final(s *state) {
	if s.store != 3 {
		s.setViol(vStuck, 0)
		return
	}
	for k := range int8(nKey) {
		for sv := range int8(nSrv) {
			if s.srv[sv].mark[k] != 0 {
				s.setViol(vMarkLeft, k)
			}
			if sv != md.ownerT[k] && s.srv[sv].val[k] != 0 {
				if md.moving[k] && sv == md.ownerL[k] {
					s.setViol(vLeftOnSource, k)
				} else {
					s.setViol(vExtraCopy, k)
				}
			}
		}
		md.checkRead(s, k, s.known[k], s.srv[md.ownerT[k]].val[k], vFinalRead)
	}
}

// ---- the search ----

type result struct {
	states, finals int
	viol           int8
	trace          []string
	capped         bool
	elapsed        time.Duration
}

type rec struct {
	parent int32
	act    action
}

func (md *model) explore() result {
	start := time.Now()
	init := md.prepare()
	seed1, seed2 := maphash.MakeSeed(), maphash.MakeSeed()
	key := func(s *state) [2]uint64 {
		return [2]uint64{maphash.Comparable(seed1, *s), maphash.Comparable(seed2, *s)}
	}
	visited := map[[2]uint64]struct{}{key(&init): {}}
	recs := []rec{{parent: -1}}
	type item struct {
		s   state
		rec int32
	}
	queue := []item{{init, 0}}
	var res result
	trace := func(s state, r int32) []string {
		var acts []action
		for ; r > 0; r = recs[r].parent {
			acts = append(acts, recs[r].act)
		}
		// replay from the initial state to describe each action
		cur := md.prepare()
		var out []string
		for j := len(acts) - 1; j >= 0; j-- {
			out = append(out, md.describe(&cur, acts[j]))
			found := false
			md.successors(&cur, func(n state, a action) {
				if !found && a == acts[j] {
					cur, found = n, true
				}
			})
		}
		out = append(out, "=> "+violNames[s.viol]+fmt.Sprintf(" (k%d)", s.violDetail+1))
		return out
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		res.states++
		succ := 0
		var bad *item
		md.successors(&it.s, func(n state, a action) {
			succ++
			if bad != nil {
				return
			}
			k := key(&n)
			if _, ok := visited[k]; ok {
				return
			}
			visited[k] = struct{}{}
			recs = append(recs, rec{it.rec, a})
			nx := item{n, int32(len(recs) - 1)}
			if n.viol != vNone {
				bad = &nx
				return
			}
			queue = append(queue, nx)
		})
		if bad == nil && succ == 0 {
			res.finals++
			f := it.s
			md.final(&f)
			if f.viol != vNone {
				bad = &item{f, it.rec}
			}
		}
		if bad != nil {
			res.viol = bad.s.viol
			res.trace = trace(bad.s, bad.rec)
			break
		}
		if res.states >= md.maxStates {
			res.capped = true
			break
		}
	}
	res.elapsed = time.Since(start)
	return res
}

// ---- the tests ----

var (
	get = func(k int8) opKind { return opKind{opGet, k} }
	set = func(k int8) opKind { return opKind{opSet, k} }
	del = func(k int8) opKind { return opKind{opDel, k} }
)

// k1 moves S -> D; k2 stays on S (keyStays) or moves D -> S (keyCrosses).
var (
	keyStays   = [2][nKey]int8{{srvS, srvS}, {srvD, srvS}}
	keyCrosses = [2][nKey]int8{{srvS, srvD}, {srvD, srvS}}
)

func scenario(name string, owners [2][nKey]int8, p0, p1 []opKind, timeouts, zombies, tokens int8) *model {
	return &model{name: name, ownerL: owners[0], ownerT: owners[1], hang: [nSrv]bool{srvD: true},
		maxTimeouts: timeouts, maxZombies: zombies, maxTok: tokens, progs: [nProc][]opKind{p0, p1}, maxStates: 5_000_000}
}

func TestModelQuick(t *testing.T) {
	md := scenario("write-read", keyStays, []opKind{set(0), get(0)}, []opKind{get(0)}, 1, 0, 3)
	res := md.explore()
	t.Logf("%s: %d states, %d final, %v, viol %d capped %v", md.name, res.states, res.finals, res.elapsed, res.viol, res.capped)
	for _, l := range res.trace {
		t.Log(l)
	}
}
