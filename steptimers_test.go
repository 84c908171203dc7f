package asyncsteps

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// namedTimers are step timers whose timeouts have names, for the traces.
type namedTimers struct {
	stepTimers
	names map[*timerEntry]string
}

func newNamedTimers() *namedTimers {
	n := &namedTimers{names: map[*timerEntry]string{}}
	n.init(new(atomic.Uint64))
	return n
}

// arm arms a timeout of d named name; now is the clock it reads if it goes
// to the heap.
func (n *namedTimers) arm(name string, d time.Duration, now func() int64) *timerEntry {
	e := &timerEntry{step: true}
	n.names[e] = name
	n.push(e, d, now)
	return e
}

// armAt arms a timeout of d at time now and stamps it at once.
func (n *namedTimers) armAt(name string, now int64, d time.Duration) *timerEntry {
	e := n.arm(name, d, func() int64 { return now })
	n.stamp(now)
	return e
}

// fireAll takes the timeouts in the order they fall due and names them.
func (n *namedTimers) fireAll() string {
	var fired []string
	for e := n.first(); e != nil; e = n.first() {
		n.take(e)
		fired = append(fired, fmt.Sprintf("%s@%d", n.names[e], e.due))
	}
	return strings.Join(fired, ",")
}

// Timeouts of many durations, armed at different times, some disarmed
// from the middle of their list, more durations than lists (the rest go to
// the heap): they fall due by time, then in the order they were armed.
func TestStepTimersOrder(t *testing.T) {
	s := newNamedTimers()
	arm := s.armAt
	arm("a", 0, 10)
	b := arm("b", 1, 10)
	arm("c", 2, 10)
	arm("d", 0, 5)
	arm("e", 3, 8) // due 11, like a: armed later, so after it
	arm("f", 0, 11)
	for i := range maxTimerLists + 2 { // durations 100.. beyond the lists
		arm(fmt.Sprintf("h%d", i), 0, time.Duration(100+i))
	}
	arm("g", 4, 7) // due 11 as well, armed last
	b.Cancel()
	if b.list != nil {
		t.Fatal("a cancelled timer is still listed")
	}
	got := s.fireAll()
	want := "d@5,a@10,e@11,f@11,g@11,c@12,h0@100,h1@101,h2@102,h3@103,h4@104,h5@105,h6@106,h7@107,h8@108,h9@109"
	if got != want {
		t.Errorf("fired\n got: %s\nwant: %s", got, want)
	}
	if len(s.lists) != maxTimerLists || s.heap.len() != 0 {
		t.Errorf("%d lists, %d in the heap; want %d, 0", len(s.lists), s.heap.len(), maxTimerLists)
	}
}

// An emptied list is reused for another duration; disarming the head, the
// tail and the only entry of a list leaves it consistent.
func TestStepTimersUnlinkAndReuse(t *testing.T) {
	s := newNamedTimers()
	arm := func(name string, d time.Duration) *timerEntry { return s.armAt(name, 0, d) }
	for i := range maxTimerLists {
		arm(fmt.Sprint("x", i), time.Duration(i+1)).Cancel()
	}
	head := arm("head", 50)
	arm("mid", 50)
	tail := arm("tail", 50)
	head.Cancel()
	tail.Cancel()
	only := arm("only", 60)
	if only.list == nil {
		t.Fatal("an emptied list was not reused: the timer went to the heap")
	}
	later := arm("later", 50)
	if got, want := s.fireAll(), "mid@50,later@50,only@60"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}
	s.dropAll()
	if e := s.first(); e != nil {
		t.Errorf("after dropAll, %s is still armed", s.names[e])
	}
	if later.list != nil {
		t.Error("a fired timer is still listed")
	}
}

// A listed timeout gets its due from the next stamp: until then it is not
// due, whatever the time; a stamp gives the timeouts armed since the last
// one the time it is given, in the order they were armed, and leaves those
// stamped before as they were. One disarmed before its stamp is simply
// gone.
func TestStepTimersFallDueFromTheirStamp(t *testing.T) {
	s := newNamedTimers()
	arm := func(name string, d time.Duration) *timerEntry {
		return s.arm(name, d, func() int64 { t.Fatal("a listed timeout read the clock"); return 0 })
	}
	arm("a", 10)
	arm("b", 20)
	if e := s.first(); e != nil {
		t.Fatalf("%s is due before its stamp", s.names[e])
	}
	s.stamp(5)
	arm("c", 10)
	arm("d", 10).Cancel()
	arm("e", 20)
	s.stamp(7)
	s.stamp(1000) // nothing armed since: changes nothing
	if got, want := s.fireAll(), "a@15,c@17,b@25,e@27"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}

	// A timeout stamped due never is stamped all the same: it is first
	// when nothing else is armed, and the next stamps leave it alone.
	never := arm("never", math.MaxInt64)
	s.stamp(2000)
	arm("never too", math.MaxInt64)
	s.stamp(3000)
	if e := s.first(); e != never || never.due != math.MaxInt64 {
		t.Errorf("first is %s due %d, want never, due %d", s.names[e], e.due, int64(math.MaxInt64))
	}
}

// Timeouts stamped due at the same time fall due in the order they were
// armed, whatever their lists' order: here q is armed after p but in an
// earlier list, emptied and taken again for q's duration, and both are due
// at the stamp (a duration <= 0 is due at once).
func TestStepTimersTiesInArmingOrder(t *testing.T) {
	s := newNamedTimers()
	clock := func() int64 { return 0 }
	x := s.arm("x", 5, clock) // makes the first list
	s.arm("p", -1, clock)     // the second list
	x.Cancel()                // empties the first list
	q := s.arm("q", 0, clock)
	if q.list != s.lists[0] {
		t.Fatal("q did not take the first list: the test no longer shows the order")
	}
	s.stamp(10)
	if got, want := s.fireAll(), "p@10,q@10"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}
}

// A step timeout armed by a callback that a timer runs is stamped before
// fireTimers returns: it counts from the end of that pass, not from the
// end of the next batch of callbacks.
func TestTimeoutsArmedByTimersStampedInTheirPass(t *testing.T) {
	l := newIdleLoop()
	var second *timerEntry
	l.deferTask(0, funcTask(func() {
		second = l.deferTask(time.Hour, funcTask(func() {}))
	}))
	l.fireTimers()
	switch {
	case second == nil:
		t.Fatal("the first timeout, due at once, did not fire")
	case second.unstamped || l.stepTimers.armed != 0:
		t.Error("the timeout armed by the first one's callback is left unstamped")
	}
}

// A step timer taken from the loop's pool, last armed in a list and
// disarmed before it was stamped, then armed in the heap (every list
// holds timeouts of another duration) is not taken for an unstamped one
// of a list: the deadline of an Await function under it was read from
// the list it no longer had, and the flow failed with the nil
// dereference's InternalError.
func TestStepTimerReArmedFromAListToTheHeapGivesAwaitItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLoop()
		defer l.Close()
		var left time.Duration
		var nest func(level int) StepFunc
		nest = func(level int) StepFunc {
			return func(as AsyncSteps, _ ...any) {
				if level <= maxTimerLists { // a list for each duration
					as.SetTimeout(time.Duration(10+level) * time.Hour)
					as.Add(nest(level + 1))
					return
				}
				as.SetTimeout(11 * time.Hour) // in the first list, not stamped
				as.SetTimeout(time.Hour)      // its pooled timer, in the heap
				as.Await(func(ctx context.Context) (any, error) {
					d, _ := ctx.Deadline()
					left = time.Until(d)
					return nil, nil
				})
			}
		}
		r := New(WithTool(l))
		r.Add(nest(1))
		if _, err := r.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if left != time.Hour {
			t.Errorf("the Await function's deadline is %v away, want 1h", left)
		}
	})
}
