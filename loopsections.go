package asyncsteps

// This file holds the ring of critical sections a Loop's flows hold, which
// a closing Loop leaves so that shared Mutexes and Throttles get their
// slots back.

// linkSection links s into the ring of sections. Loop goroutine only.
// Only a Loop that can close links its sections: the ring keeps them
// reachable, and the loop of DefaultTool never gives them back.
func (l *Loop) linkSection(s *section) {
	if l.shared {
		return
	}
	head := &l.sections
	if head.next == nil {
		head.prev, head.next = head, head
	}
	s.prev, s.next = head.prev, head
	head.prev.next = s
	head.prev = s
}

// leaveSections leaves every section still in the ring.
func (l *Loop) leaveSections() {
	head := &l.sections
	for head.next != nil && head.next != head {
		head.next.leave(nil) // unlinks it
	}
}
