package asyncsteps

import (
	"sync/atomic"
	"weak"
)

// enginePools is what the flows of one loop share without a lock, owned by
// the loop's goroutine: blocks of step APIs, so that a step costs no
// allocation of its own (a block is garbage once no step API in it is kept),
// and finished frames, for the next steps of any flow of the loop.
type enginePools struct {
	bursts   atomic.Bool   // set from any goroutine: see Loop.SetBursts
	stepAPIs *[256]stepAPI // the block step APIs are taken from, in order
	nextAPI  uint8         // the next one to take; 0: take a new block
	frames   *frame        // linked by parent
	nframes  int
	timers   *timerEntry // step timers given back, linked by next
	ntimers  int
	parked   map[weak.Pointer[flow]]struct{} // see flow.park
	obs      *observer                       // the tool's hooks (hooks.go), nil when unset
}

// maxPooledFrames bounds the frames a loop keeps for later steps.
const maxPooledFrames = 4096

func (l *enginePools) nextStepAPI() *stepAPI {
	// An index that wraps, rather than a slice moved on: taking one costs
	// no bounds check and no write of a pointer.
	if l.nextAPI == 0 {
		l.stepAPIs = new([256]stepAPI)
	}
	h := &l.stepAPIs[l.nextAPI]
	l.nextAPI++
	return h
}

// takeFrame returns a pooled frame, or nil.
func (l *enginePools) takeFrame() *frame {
	f := l.frames
	if f != nil {
		l.frames = f.parent
		l.nframes--
		f.parent = nil
	}
	return f
}

// takeTimer returns a pooled step timer, ready to be pushed, or a new one.
func (l *enginePools) takeTimer() *timerEntry {
	e := l.timers
	if e == nil {
		return &timerEntry{}
	}
	l.timers, e.next = e.next, nil
	l.ntimers--
	return e
}

// keepTimer pools a step timer that has run or been cancelled.
func (l *enginePools) keepTimer(e *timerEntry) {
	if l.ntimers < maxPooledFrames {
		e.t = nil
		e.next = l.timers
		l.timers = e
		l.ntimers++
	}
}

// keepFrame pools a finished frame, unless the pool is full.
func (l *enginePools) keepFrame(f *frame) {
	if l.nframes < maxPooledFrames {
		f.parent = l.frames
		l.frames = f
		l.nframes++
	}
}
