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
// What is modelled (after fleet/driver.go, fleet/member.go, redis/fleet.go
// and redis/fleetmove.go):
//
//   - S and D: each key's value (a write ID), the move marks, the fence
//     epoch, the moved flag, the restored and revoked tokens. Each script
//     is one atomic step of its server.
//   - Connections: a process's client names its connections with the epoch
//     it was made for; a new one is named and checked against the fence;
//     KILLOLDER drops the messages not yet run on the named connections of
//     older epochs, late ones included.
//   - Two processes, each running a short program (writes of distinct
//     values, deletes, reads), one command at a time. Before a command (or
//     before running again a command a fence refused) a process applies any
//     of the newer steps stored, in order, possibly skipping some, and
//     relabels its clients as Apply does (Preparing after Stable(L) keeps
//     them; Moving after Preparing relabels the sources, else every shard;
//     Stable(T) after Moving keeps them, else relabels every shard). A
//     command routes by the view it started with: Stable(L) and Preparing
//     to the owner under L; Moving: the move first (mark and dump on the
//     source, restore on the destination, finish; a busy mark waited for
//     or settled; an unanswered restore settled; a failed mark's token
//     aborted; a key found gone is remembered), then the owner under T;
//     Stable(T) to the owner under T. A refused connection makes the
//     command wait for a newer state (or give up: FleetWait); a killed
//     connection or a timeout fails it, its outcome unknown.
//   - The driver: stores Preparing; scans each destination for the keys it
//     gains and drops them (refused once the server is marked moved);
//     fences each source (raise the epoch, kill older connections, mark
//     moved) and marks the other servers moved; stores Moving; migrates
//     (scans each source and moves what is there, then lists the marks and
//     moves their keys, until a pass finds none); cleans up every server
//     (the restored tokens go; the revoked ones stay, their hour-long
//     expiry being time, outside the model: a negative control lets them
//     expire); stores Stable(T). A failed driver resumes from the stored
//     step. A paused driver is a copy that goes on later with its message
//     in flight and its program (and may win the compare-and-swap of a
//     step; the loser resumes).
//   - A hung server: a message to it may time out at its client (error,
//     connection closed), then run at any later point, in any order with
//     other connections' messages, or be dropped by a kill.
//
// Abstracted away: time (a mover may settle any mark it finds, as if old,
// or wait for it); expiries (PEXPIRETIME, ABSTTL); SCAN cursors (a scan
// reads one key, atomically); batches (one key per move); concurrency
// inside one process (gates, key locks, a window's remembered keys);
// go-redis retries (the SDK sets MaxRetries -1); ejections and stand-ins;
// the store's watch (a process may see any stored step); more than one
// resharding. A connection that a kill finds between its name and its
// fence check only fails its command, so the two are one step (the broken
// variant that checks first splits them). Apply runs between commands: it
// changes only the next command's view and connections. The bounds: the
// programs, the timeouts, the paused drivers, and the move tokens (a move
// that needs one more fails, as if its context ended).
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
	"unsafe"
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
	opRestore // restoreScript: unless revoked or restored, RESTORE REPLACE and record restored
	opFinish  // finishScript "finish": delete key and mark if the mark is the token
	opAbort   // finishScript "abort": delete the mark if it is the token
	opSettle  // settleScript: restored, else revoke
	opScan    // the driver finds whether a key is on a server (SCAN)
	opHkeys   // the driver lists the marks of a source (HKEYS)
	opDrop    // dropStaleScript
	opRaise   // raiseFenceScript
	opKill    // CLIENT KILL of fleet connections named with an older epoch
	opMoved   // HSET fence moved <change>
	opCleanup // cleanupScript "keep": the restored tokens go (the revoked ones stay an hour)
)

var stepNames = [...]string{"Stable(L)", "Preparing", "Moving", "Stable(T)"}

var opNames = [...]string{"-", "GET", "SET", "DEL", "MARK", "RESTORE", "FINISH", "ABORT", "SETTLE", "SCAN", "HKEYS", "DROPSTALE", "RAISEFENCE", "KILLOLDER", "MARKMOVED", "CLEANUP"}

// Reply kinds.
const (
	rOK      int8 = iota
	rErr          // no reply: a killed connection or a timeout (unknown outcome)
	rRefused      // the fence refused the connection
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

// msg is one message to a server. lab is its connection's epoch; 0 for the
// driver's (its admin connections are unnamed, and its own client's carry
// the Moving epoch: no fence closes or refuses either).
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
	dCleanup
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
	tag            int8    // driver, removing stale copies: 0 scan, 2 drop
}

// conn is a process's connection to a server: its epoch, and whether the
// server knows its name (and it passed the fence check).
type conn struct {
	lab  int8
	live bool
}

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
	vLostDelete // a read of "absent" that no delete explains (a lost write)
	vSourceWrite
	vLeftOnSource
	vMarkLeft
	vExtraCopy
	vFinalRead
	vStuck
)

var violNames = [...]string{"", "stale read or lost acknowledged write (or resurrected delete)", "read of absent with no delete it may come from (lost write)",
	"a moving key was written on its source after the source was marked moved", "a moving key is left on its source at Stable(T)",
	"a move mark is left at Stable(T)", "a key is on a server that does not own it at Stable(T)", "the final value of a key is stale or lost",
	"a final state that is not Stable(T)"}

// Events of note, counted over a search (the model must reach them, else
// its checks say little).
const (
	evRefused        = iota // a fence refused a connection
	evKillDrop              // a fence's kill dropped a message not yet run
	evLate                  // a message whose client had given up ran
	evBusy                  // a move found its key marked by another
	evRestoreRevoked        // a RESTORE refused: its token was revoked
	evSettleRestored        // a settle found the token restored
	evSettleRevoked         // a settle revoked a token
	evMoved                 // a move deleted its key from the source
	evWriteOnDest           // a command wrote a moving key on its destination
	evSkip                  // a process applied a state skipping one
	nEv
)

var evNames = [...]string{"refused", "killDrop", "late", "busy", "restoreRevoked", "settleRestored", "settleRevoked", "moved", "writeOnDest", "skip"}

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
	bugAbortWithoutSettle // a RESTORE with no answer: abort the move at once
	bugRevokedExpire      // the cleanup's revoked tokens expire before a late RESTORE lands
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
	cov            [nEv]int // how often each event of note happened

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
	// Each key is on its owner under L; k1's destination holds a stale
	// copy of it (a leftover of an earlier change) that the driver must
	// remove before moves begin: a read that returns it is stale.
	for k := range int8(nKey) {
		s.srv[md.ownerL[k]].val[k] = md.initial[k]
		s.known[k] = 1 << md.initial[k]
	}
	s.srv[md.ownerT[0]].val[0] = md.stale
	s.prior[md.initial[0]] = 1 << md.stale
	for p := range nProc {
		s.p[p].lab = [nSrv]int8{1, 1} // both apply Stable(L), epoch 1
	}
	s.a[zomA].pc = dDone
	return s
}

// action names a transition, for counterexample traces.
type action struct{ kind, who, x, y int8 }

const (
	aStart int8 = iota
	aRetry
	aGiveUp
	aExec
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
		var args string
		switch m.op {
		case opGet, opDel, opScan, opDrop:
			args = fmt.Sprintf("k%d", m.key+1)
		case opSet:
			args = fmt.Sprintf("k%d=w%d", m.key+1, m.arg)
		case opMark, opFinish, opAbort:
			args = fmt.Sprintf("k%d, token %d", m.key+1, m.arg)
		case opRestore:
			args = fmt.Sprintf("k%d=w%d, token %d", m.key+1, m.arg2, m.arg)
		case opSettle:
			args = fmt.Sprintf("token %d", m.arg)
		case opRaise, opKill:
			args = fmt.Sprint(m.arg)
		}
		conn := "a driver's connection (never fenced)"
		if m.lab > 0 {
			conn = fmt.Sprintf("a connection of epoch %d", m.lab)
		}
		return fmt.Sprintf("%s(%s) on %s", opNames[m.op], args, conn)
	}
	phase := func() string {
		switch {
		case act.who >= drvA || s.a[act.who].phase == 2:
			return msgStr(m)
		case s.a[act.who].phase == 1:
			return fmt.Sprintf("SETNAME of a connection of epoch %d (for %s)", m.lab, opNames[m.op])
		case md.bugs&bugCheckBeforeName != 0:
			return fmt.Sprintf("fence check of an unnamed connection of epoch %d (for %s)", m.lab, opNames[m.op])
		default:
			return fmt.Sprintf("SETNAME and fence check of a new connection of epoch %d (for %s)", m.lab, opNames[m.op])
		}
	}
	switch act.kind {
	case aStart, aRetry:
		var applied []string
		for j := range int8(3) {
			if act.x&(1<<j) != 0 {
				applied = append(applied, stepNames[act.y+1+j])
			}
		}
		o := md.progs[act.who][s.a[act.who].pc]
		what := fmt.Sprintf("starts %s k%d", opNames[o.kind], o.key+1)
		if w := md.wid[act.who][s.a[act.who].pc]; w != 0 {
			what += fmt.Sprintf(" (write w%d)", w)
		}
		if act.kind == aRetry {
			what = "retries its command refused by the fence"
		}
		if len(applied) > 0 {
			what = "applies " + strings.Join(applied, ", ") + ", then " + what
		}
		return who + " " + what
	case aGiveUp:
		return who + " gives up waiting for a newer state"
	case aExec:
		return fmt.Sprintf("%c runs %s's %s", "SD"[m.srv], who, phase())
	case aTimeout:
		return fmt.Sprintf("%s times out on %s (it may still run later)", who, phase())
	case aOrphan:
		return fmt.Sprintf("%c runs a late %s", "SD"[s.orph[act.x].srv], msgStr(s.orph[act.x]))
	case aDriver:
		if st := [...]int8{dPrep: 0, dSwapMoving: 1, dSwapStable: 2}[s.a[act.who].pc]; st != s.store {
			return who + " fails to store the next step (another driver stored it)"
		}
		return fmt.Sprintf("%s stores %s", who, stepNames[s.store+1])
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
		if md.moving[k] && md.ownerT[k] == m.srv {
			md.cov[evWriteOnDest]++
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
			md.cov[evBusy]++
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
			md.cov[evRestoreRevoked]++
			return reply{rRevoked, 0}
		}
		if sv.restored&(1<<m.arg) != 0 { // restored once: a copy of it sent again changes nothing
			return reply{rOK, 0}
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
				md.cov[evMoved]++
			}
		}
		return reply{rOK, 0}
	case opSettle:
		if sv.restored&(1<<m.arg) != 0 {
			md.cov[evSettleRestored]++
			return reply{rRestored, 0}
		}
		if md.bugs&bugSettleNoRevoke == 0 {
			sv.revoked |= 1 << m.arg
		}
		md.cov[evSettleRevoked]++
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
	case opCleanup:
		sv.restored = 0
		if md.bugs&bugRevokedExpire != 0 {
			sv.revoked = 0 // the hour has passed
		}
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
		if !c.live || c.lab >= e {
			continue
		}
		*c = conn{}
		if a := &s.a[p]; a.m.op != opNone && a.m.srv == sv {
			md.cov[evKillDrop]++
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
	if c.lab == m.lab && c.live {
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

// settled goes on from the answer (kind) of a settle of token tok on the
// destination: finish the move on src when it was restored, abort it when
// it was revoked (next state finish or abort), fail on an error.
func (md *model) settled(s *state, i int, kind int8, src, tok, finish, abort int8) {
	a := &s.a[i]
	switch kind {
	case rRestored:
		a.cs = finish
		md.send(s, i, msg{op: opFinish, srv: src, key: a.key, arg: tok})
	case rRevoked:
		a.cs = abort
		md.send(s, i, msg{op: opAbort, srv: src, key: a.key, arg: tok})
	default:
		md.fail(s, i)
	}
}

func (md *model) moveDone(s *state, i int) {
	a := &s.a[i]
	if i >= drvA {
		if a.failed {
			md.fail(s, i)
			return
		}
		a.cs, a.key, a.tok, a.btok, a.val = csIdle, 0, 0, 0, 0
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
	switch {
	case i < drvA:
		endCommand(a)
	case i == zomA:
		*a = actor{}
		a.pc = dDone
	default:
		md.restartDriver(s)
	}
}

// endCommand ends a process's command: it goes on to the next, and what
// the command held is cleared (so that states that differ only there are
// one).
func endCommand(a *actor) {
	*a = actor{pc: a.pc + 1}
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
			endCommand(a)
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
			if md.bugs&bugAbortWithoutSettle != 0 {
				a.cs = csAbortFail
				md.send(s, i, msg{op: opAbort, srv: src, key: a.key, arg: a.tok})
				return
			}
			a.cs = csSettleOwn
			md.send(s, i, msg{op: opSettle, srv: dst, key: a.key, arg: a.tok})
		}
	case csSettleOwn:
		md.settled(s, i, r.kind, src, a.tok, csFinish, csAbortFail)
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
		md.settled(s, i, r.kind, src, a.btok, csFinishBusy, csAbortBusy)
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
		if s.store != 0 {
			md.lostSwap(s, i)
			return
		}
		s.store = 1
		a.pc, a.di = dDrop, 0
	case dDrop: // the keys each destination gains: scan, then drop
		if a.di == nKey {
			a.pc, a.di, a.dsub, a.tag = dFence, 0, 0, 0
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
		if s.store != 1 {
			md.lostSwap(s, i)
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
		a.cs = csDrv
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
			a.pc, a.di = dCleanup, 0
		case !md.isSource[a.di]:
			a.di++
		default:
			a.cs = csDrv
			md.send(s, i, msg{op: opHkeys, srv: a.di})
		}
	case dCleanup:
		if a.di == nSrv {
			a.pc = dSwapStable
			return
		}
		a.cs = csDrv
		md.send(s, i, msg{op: opCleanup, srv: a.di})
	case dSwapStable:
		if s.store != 2 {
			md.lostSwap(s, i)
			return
		}
		s.store = 3
		a.pc = dDone
	}
}

// lostSwap: a driver's compare-and-swap of the next step failed (another
// driver stored it first). The driver fails: a paused one stops, the
// other resumes from the step stored (as Resume would, run again).
func (md *model) lostSwap(s *state, i int) {
	if i == zomA {
		s.a[i].pc = dDone
		return
	}
	md.restartDriver(s)
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
		case r.kind == rNeg: // the server is marked moved: fail (Resume goes on)
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
	case dCleanup:
		a.di++
	}
}

// ---- learning the store's state ----

// learn makes process p apply step j, relabelling its connections as
// fleetBackend.Apply does.
func (md *model) learn(s *state, p int, j int8) {
	pr := &s.p[p]
	next := j == pr.applied+1
	if !next {
		md.cov[evSkip]++
	}
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

func (md *model) successors(s *state, emit0 func(state, action)) {
	emit := func(n state, a action) {
		md.runDrivers(&n)
		emit0(n, a)
	}
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
		md.cov[evLate]++
		md.exec(&n, m)
		emit(n, action{aOrphan, 0, int8(o), 0})
	}
}

// runDrivers takes the drivers' local steps at once: those that only
// send a message (which shows when it runs) or move on in the driver's own
// loops. Storing a step (a compare-and-swap that either driver, the
// paused one too, may win) stays a transition of its own.
func (md *model) runDrivers(s *state) {
	for _, i := range [...]int{drvA, zomA} {
		a := &s.a[i]
		for a.pc != dDone && a.m.op == opNone && a.cs == csIdle && a.pc != dPrep && a.pc != dSwapMoving && a.pc != dSwapStable {
			md.driverStep(s, i)
		}
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
	fenced := a.cs == csFenced
	if !fenced && (a.cs != csIdle || int(a.pc) >= len(md.progs[p])) {
		return
	}
	if fenced { // FleetWait ends
		n := *s
		md.fail(&n, p)
		emit(n, action{aGiveUp, int8(p), 0, 0})
	}
	// The steps it applies before it starts (or, refused by a fence,
	// retries): any of the newer steps stored, in order, possibly skipping
	// some. (Apply is local to the process: it shows only in the routing
	// and the connections of its next command, so it is taken here.)
	newer := s.store - s.p[p].applied
	for path := int8(0); path < 1<<newer; path++ {
		if fenced && path == 0 {
			continue
		}
		n := *s
		from := n.p[p].applied
		for j := range newer {
			if path&(1<<j) != 0 {
				md.learn(&n, p, from+1+j)
			}
		}
		b := &n.a[p]
		kind := aRetry
		if !fenced {
			kind = aStart
			o := md.progs[p][b.pc]
			if o.kind == opGet {
				b.rsnap = n.known[o.key]
			} else {
				w := md.wid[p][b.pc]
				n.invoked |= 1 << w
				n.prior[w] = n.known[o.key]
			}
		}
		b.cs, b.view, b.vlab = csOp, n.p[p].applied, n.p[p].lab
		md.route(&n, p)
		emit(n, action{kind, int8(p), path, from})
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
		// Connecting: the name is set, then the fence checked, in one
		// step (a kill between the two only fails the command); the
		// broken variant checks first and names after, in two steps.
		c := &n.p[i].conn[m.srv]
		b := &n.a[i]
		switch {
		case a.phase == 1: // bugCheckBeforeName: the name, after the check
			c.live = true
			b.phase = 2
		case m.lab < n.srv[m.srv].fence:
			*c = conn{}
			md.cov[evRefused]++
			md.onReply(&n, i, reply{rRefused, 0})
		case md.bugs&bugCheckBeforeName != 0:
			b.phase = 1
		default:
			c.live = true
			b.phase = 2
		}
		emit(n, action{aExec, int8(i), 0, 0})
	} else {
		md.onReply(&n, i, md.exec(&n, m))
		emit(n, action{aExec, int8(i), 0, 0})
	}
	if !md.hang[m.srv] || s.timeouts >= md.maxTimeouts {
		return
	}
	// A timeout: the client closes the connection and gets an error; the
	// message, if it was sent, may still run later (at once: the reply was
	// lost), or be dropped by a fence's kill.
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
		// state holds no pointers and no padding is ever written (every
		// state is a copy of the zero-based initial one): hash its bytes.
		b := unsafe.Slice((*byte)(unsafe.Pointer(s)), unsafe.Sizeof(*s))
		return [2]uint64{maphash.Bytes(seed1, b), maphash.Bytes(seed2, b)}
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
	// Breadth first, a level at a time (the shortest counterexample).
	var next []item
	for len(queue) > 0 && res.viol == vNone && !res.capped {
		for qi := range queue {
			it := &queue[qi]
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
				next = append(next, nx)
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
		queue, next = next, queue[:0]
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

// modelScenarios are the protocol's checks: short ones by default, and
// larger ones (longer programs, more timeouts, a paused driver together
// with a hung destination) with SHARDEDCACHE_LONG=1.
func modelScenarios(long bool) []*model {
	k1, k2 := int8(0), int8(1)
	ops := func(o ...opKind) []opKind { return o }
	short := []*model{
		scenario("write k1 / read k1", keyStays, ops(set(k1)), ops(get(k1)), 0, 0, 3),
		scenario("write+read k1, hung D", keyStays, ops(set(k1), get(k1)), nil, 1, 0, 3),
		scenario("delete k1 / read k1", keyStays, ops(del(k1)), ops(get(k1)), 0, 0, 3),
		scenario("two writers of k1", keyStays, ops(set(k1)), ops(set(k1)), 0, 0, 3),
		scenario("write k1, paused driver", keyStays, ops(set(k1)), nil, 0, 1, 3),
		scenario("write k2 (stays on S) / write k1", keyStays, ops(set(k2)), ops(set(k1)), 0, 0, 3),
		scenario("keys cross: write k2 / read k1", keyCrosses, ops(set(k2)), ops(get(k1)), 0, 0, 3),
	}
	if !long {
		return short
	}
	return append(short,
		scenario("write k1 / read k1, hung D", keyStays, ops(set(k1)), ops(get(k1)), 1, 0, 3),
		scenario("write+read k1 / read k1", keyStays, ops(set(k1), get(k1)), ops(get(k1)), 0, 0, 3),
		scenario("delete k1 / read k1, hung D", keyStays, ops(del(k1)), ops(get(k1)), 1, 0, 3),
		scenario("write k1 / read k1, paused driver", keyStays, ops(set(k1)), ops(get(k1)), 0, 1, 3),
		scenario("keys cross: write k1 / write k2, hung D", keyCrosses, ops(set(k1)), ops(set(k2)), 1, 0, 3),
		hangBoth(scenario("write k1 / read k1, S and D hang", keyStays, ops(set(k1)), ops(get(k1)), 1, 0, 3)),
		scenario("delete+read k1 / write k1", keyStays, ops(del(k1), get(k1)), ops(set(k1)), 0, 0, 3),
		scenario("read+write k1, 2 timeouts on D", keyStays, ops(get(k1), set(k1)), nil, 2, 0, 4),
		scenario("write+read k1, paused driver, hung D", keyStays, ops(set(k1), get(k1)), nil, 1, 1, 3),
	)
}

// hangBoth lets messages to S time out too.
func hangBoth(md *model) *model {
	md.hang = [nSrv]bool{true, true}
	return md
}

func modelLong() bool { return os.Getenv("SHARDEDCACHE_LONG") == "1" }

// TestModelProtocol searches every interleaving of each scenario and
// requires that no state breaks a check, that every search ends (it is
// exhaustive), and that the scenarios together reach every event of note.
func TestModelProtocol(t *testing.T) {
	var cov [nEv]int
	total := 0
	for _, md := range modelScenarios(modelLong()) {
		res := md.explore()
		total += res.states
		t.Logf("%-45s %8d states %6d final states  %v", md.name, res.states, res.finals, res.elapsed.Round(time.Millisecond))
		switch {
		case res.viol != vNone:
			t.Errorf("%s: %s; counterexample:\n  %s", md.name, violNames[res.viol], strings.Join(res.trace, "\n  "))
		case res.capped:
			t.Errorf("%s: the search stopped at %d states: not exhaustive", md.name, res.states)
		case res.finals == 0:
			t.Errorf("%s: no final state reached", md.name)
		}
		for e := range cov {
			cov[e] += md.cov[e]
		}
	}
	var evs []string
	for e, n := range cov {
		evs = append(evs, fmt.Sprintf("%s=%d", evNames[e], n))
		if n == 0 {
			t.Errorf("no scenario reached the event %q: the model lost a behaviour", evNames[e])
		}
	}
	t.Logf("%d states in all; events (transitions): %s", total, strings.Join(evs, " "))
}

// TestModelNegativeControls runs the checker on broken variants of the
// protocol: it must find a counterexample in each.
func TestModelNegativeControls(t *testing.T) {
	k1 := int8(0)
	ops := func(o ...opKind) []opKind { return o }
	for _, c := range []struct {
		bug  bug
		name string
		md   *model
		want int8
	}{
		{bugNoFence, "no fence before moves (only marked moved)",
			scenario("", keyStays, ops(set(k1)), ops(get(k1)), 0, 0, 3), vSourceWrite},
		{bugKillBeforeRaise, "the fence kills before it raises the epoch",
			scenario("", keyStays, ops(set(k1)), ops(get(k1)), 0, 0, 3), vSourceWrite},
		{bugCheckBeforeName, "a connection checks the fence before it is named",
			scenario("", keyStays, ops(set(k1)), ops(get(k1)), 0, 0, 3), vSourceWrite},
		{bugNoMark, "a move that skips the mark (DUMP, RESTORE, DEL)",
			scenario("", keyStays, ops(set(k1)), ops(get(k1)), 0, 0, 3), vStaleRead},
		{bugRestoreIgnoresRevoke, "RESTORE without the revoke check",
			scenario("", keyStays, ops(get(k1), set(k1)), nil, 1, 0, 3), vLeftOnSource},
		{bugSettleNoRevoke, "a settle that does not revoke",
			scenario("", keyStays, ops(get(k1), set(k1)), nil, 1, 0, 3), vLeftOnSource},
		{bugAbortWithoutSettle, "a RESTORE with no answer aborted at once, not settled (hung D)",
			scenario("", keyStays, ops(get(k1), set(k1)), nil, 1, 0, 3), vFinalRead},
		{bugRevokedExpire, "revoked tokens gone (their 1 h expiry) before a late RESTORE lands",
			scenario("", keyStays, ops(get(k1), set(k1)), nil, 1, 0, 3), vFinalRead},
		{bugDropUnguarded, "a removal of stale copies not refused once moved",
			scenario("", keyStays, ops(set(k1)), nil, 0, 1, 3), vFinalRead},
	} {
		md := c.md
		md.bugs = c.bug
		res := md.explore()
		if res.viol == vNone {
			t.Errorf("%s: no counterexample in %d states (capped: %v): the checker cannot see this flaw", c.name, res.states, res.capped)
			continue
		}
		t.Logf("%-50s found after %7d states (%v): %s; counterexample:\n  %s", c.name, res.states, res.elapsed.Round(time.Millisecond),
			violNames[res.viol], strings.Join(res.trace, "\n  "))
		if res.viol != c.want {
			t.Errorf("%s: found %q, want %q", c.name, violNames[res.viol], violNames[c.want])
		}
	}
}
