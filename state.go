package asyncsteps

import "sort"

// State is the state shared by every step of one flow (spec 1.7): the
// predefined error variables and the user variables set with Set.
//
// A State belongs to its flow's loop: use it from the flow's callbacks, or
// from any goroutine while the flow is not running.
//
// AsyncStack is written by the engine at each error; read it, copy it, but
// do not change its elements: an error raised again at the same place
// keeps the same slice, which flows of the same loop failing at that place
// share. A slice assigned to AsyncStack is replaced at the next error.
// Likewise the *Error of a Break or Continue in LastException may be
// shared by the flows of a loop: do not change it.
type State struct {
	ErrorInfo     string   // info of the last Error call
	LastException error    // last error or recovered panic, as a Go error
	AsyncStack    []string // at an error: the step functions on the stack, outermost first
	vars          map[string]any
	stack         recordedStack // the AsyncStack the engine wrote last
}

// recordedStack is the AsyncStack as the engine wrote it last, with the
// entry addresses of the functions it names.
type recordedStack struct {
	rec *stackRecord // nil: none
	// at is a live frame whose stack is the first depth entries of rec,
	// or nil: an error unwinding moves it up level by level, so that a
	// handler rethrowing at each level finds its stack at once instead of
	// walking the whole chain again (quadratic in the depth).
	at    *frame
	depth int32
	n     int32 // AsyncStack is the first n entries of rec
}

// Get returns the user variable name, or nil.
func (s *State) Get(name string) any { return s.vars[name] }

// Set sets the user variable name.
func (s *State) Set(name string, value any) {
	if s.vars == nil {
		s.vars = make(map[string]any)
	}
	s.vars[name] = value
}

// Exists reports whether the user variable name is set.
func (s *State) Exists(name string) bool {
	_, ok := s.vars[name]
	return ok
}

// Unset removes the user variable name.
func (s *State) Unset(name string) { delete(s.vars, name) }

// names returns the user variable names in sorted order.
func (s *State) names() []string {
	names := make([]string, 0, len(s.vars))
	for k := range s.vars {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// fillMissing copies the user variables of model that s does not have.
func (s *State) fillMissing(model *State) {
	for k, v := range model.vars {
		if !s.Exists(k) {
			s.Set(k, v)
		}
	}
}

// sameStack reports whether AsyncStack is still the stack the engine
// recorded last, and that stack's functions are those of inner, innermost
// first. Entry addresses are compared, not names: looking a name up costs
// more than the rest of the comparison.
func (s *State) sameStack(inner []uintptr) bool {
	r, n := s.stack.rec, len(inner)
	if r == nil || int(s.stack.n) != n || len(s.AsyncStack) != n || n > 0 && &s.AsyncStack[0] != &r.names[0] {
		return false
	}
	for i, pc := range inner {
		if r.pcs[n-1-i] != pc {
			return false
		}
	}
	return true
}
