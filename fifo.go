package asyncsteps

// This file holds fifo, the growable ring buffer that Loop and TestTool
// queue tasks in, and the rule on how much of a burst's memory a queue keeps.

import "weak"

// keptQueue is the capacity, in tasks, that a loop's queues keep while the
// loop is idle. Past it, a queue grown by a burst gives its memory back when
// the burst is over, rather than holding it for the loop's lifetime.
const keptQueue = 1024

// trimmed returns q, or nil when q is empty and larger than keptQueue.
func trimmed(q []task) []task {
	if len(q) == 0 && cap(q) > keptQueue {
		return nil
	}
	return q
}

// fifo is a FIFO queue on a circular buffer whose size is a power of two.
// It grows by doubling, so push and pop are O(1) amortized and allocate
// nothing once the buffer is large enough; it never shifts or reslices its
// contents. It keeps its capacity while in use; trim gives back a large
// buffer once it is empty. It is not safe for concurrent use.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
	// spare is the buffer trim gave back, held weakly: the next burst
	// takes it again unless a collection freed it meanwhile, so that
	// bursts close together do not grow the queue from nothing each time.
	spare weak.Pointer[[]T]
}

func (r *fifo[T]) len() int { return r.n }

// trim gives back the buffer of an empty queue larger than keptQueue.
func (r *fifo[T]) trim() {
	if r.n == 0 && len(r.buf) > keptQueue {
		buf := r.buf // all zero: pop clears what it takes
		r.spare = weak.Make(&buf)
		r.buf, r.head = nil, 0
	}
}

func (r *fifo[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

func (r *fifo[T]) pop() (T, bool) {
	var zero T
	if r.n == 0 {
		return zero, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = zero // let the GC have it
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v, true
}

func (r *fifo[T]) grow() {
	size := max(16, 2*len(r.buf))
	var buf []T
	if spare := r.spare.Value(); spare != nil && len(*spare) >= size {
		buf, r.spare = *spare, weak.Pointer[[]T]{}
	} else {
		buf = make([]T, size)
	}
	k := copy(buf, r.buf[r.head:])
	copy(buf[k:], r.buf[:r.head])
	r.buf, r.head = buf, 0
}
