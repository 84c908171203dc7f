package asyncsteps

import (
	"slices"
	"sync/atomic"
	"weak"
)

// enginePools is what the flows of one loop share without a lock, owned by
// the loop's goroutine: finished frames, for the next steps of any flow of
// the loop, step timers and sections.
type enginePools struct {
	bursts    atomic.Bool // set from any goroutine: see Loop.SetBursts
	frames    *frame      // linked by parent
	nframes   int
	timers    *timerEntry // step timers given back, linked by next
	ntimers   int
	sections  *section // sections ended on success, linked by next
	nsections int
	obs       *observer // the tool's hooks (hooks.go), nil when unset
	stacks    stackCache
	signals   signalCache
	// parked holds weakly the flows that waited for another goroutine
	// with nothing of the loop's holding them (see flow.noteParked), when
	// track is set (a Loop's: see Loop.endParked); live counts those alive
	// at the last sweep of the dead ones.
	parked []weak.Pointer[flow]
	live   int
	track  bool
}

// maxPooledFrames bounds the frames a loop keeps for later steps.
const maxPooledFrames = 4096

// noteParked notes fl weakly, dropping the notes of the flows collected
// meanwhile each time the notes have doubled.
func (l *enginePools) noteParked(fl *flow) {
	if len(l.parked) >= 2*max(l.live, 32) {
		l.parked = slices.DeleteFunc(l.parked, func(p weak.Pointer[flow]) bool { return p.Value() == nil })
		l.live = len(l.parked)
	}
	l.parked = append(l.parked, weak.Make(fl))
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

// maxPooledSections bounds the critical sections a loop keeps for later
// Sync steps. A flow that leaves a section mostly enters the next one
// soon: the pool holds those in between, not every section in use.
const maxPooledSections = 256

// takeSection returns a pooled section, blank, or a new one. A Tool of
// another package has no pools (nil): its sections are all new.
func (l *enginePools) takeSection() *section {
	if l == nil || l.sections == nil {
		return new(section)
	}
	s := l.sections
	l.sections = s.next
	l.nsections--
	s.next = nil
	return s
}

// keepSection pools s, which its flow has left, blank, unless the pool is
// full or there is none.
func (l *enginePools) keepSection(s *section) {
	if l != nil && l.nsections < maxPooledSections {
		*s = section{next: l.sections}
		l.sections = s
		l.nsections++
	}
}
