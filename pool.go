package asyncsteps

// loopLocal is what the flows of one loop share without a lock, owned by
// the loop's goroutine: blocks of handles, so that a step costs no
// allocation of its own (a block is garbage once no handle in it is kept),
// and finished frames, for the next steps of any flow of the loop.
type loopLocal struct {
	handles []handle
	frames  *frame // linked by parent
	nframes int
}

// maxPooledFrames bounds the frames a loop keeps for later steps.
const maxPooledFrames = 4096

func (l *loopLocal) nextHandle() *handle {
	if len(l.handles) == 0 {
		l.handles = make([]handle, 256)
	}
	h := &l.handles[0]
	l.handles = l.handles[1:]
	return h
}

// takeFrame returns a pooled frame, or nil.
func (l *loopLocal) takeFrame() *frame {
	f := l.frames
	if f != nil {
		l.frames = f.parent
		l.nframes--
		f.parent = nil
	}
	return f
}

// keepFrame pools a finished frame, unless the pool is full.
func (l *loopLocal) keepFrame(f *frame) {
	if l.nframes < maxPooledFrames {
		f.parent = l.frames
		l.frames = f
		l.nframes++
	}
}
