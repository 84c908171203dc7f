package asyncsteps

import (
	"maps"
	"sort"
)

// State is the state shared by every step of one flow (spec 1.7): the
// predefined error variables and the user variables set with Set.
//
// A State belongs to its flow's loop: use it from the flow's callbacks, or
// from any goroutine while the flow is not running. An [AsyncSteps.Await]
// function runs while its flow does: it must not touch the State. The zero
// value is an empty State, ready to use.
//
// The user variables are apart from the fields: Set("ErrorInfo", v) sets
// a variable of that name, which Get returns, and leaves the field
// ErrorInfo alone. Any string is a name, the empty one included, and a nil
// value is a value: Exists tells it from an unset variable.
//
// AsyncStack is written by the engine at each error; read it, copy it, but
// do not change its elements: an error raised again at the same place
// keeps the same slice, which flows of the same loop failing at that place
// share. A slice assigned to AsyncStack is replaced at the next error.
// Likewise the *Error of a Break or Continue in LastException may be
// shared by the flows of a loop: do not change it.
type State struct {
	ErrorInfo     string        // info of the last Error call
	LastException error         // last error or recovered panic, as a Go error
	AsyncStack    []string      // at an error: the step functions on the stack, outermost first
	stack         recordedStack // the AsyncStack the engine wrote last

	// The user variables: the first few in few, so that a flow with a few
	// variables allocates no map (a map of one variable costs more than
	// the State itself); once there are more, all of them in vars.
	few  [4]stateVar
	nFew int // the variables in few; 0 while vars is not nil
	vars map[string]any
}

// stateVar is a user variable kept in State.few.
type stateVar struct {
	name  string
	value any
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
func (s *State) Get(name string) any {
	if s.vars != nil {
		return s.vars[name]
	}
	if i := s.findFew(name); i >= 0 {
		return s.few[i].value
	}
	return nil
}

// Set sets the user variable name.
func (s *State) Set(name string, value any) {
	switch i := s.findFew(name); {
	case s.vars != nil:
		s.vars[name] = value
	case i >= 0:
		s.few[i].value = value
	case s.nFew < len(s.few):
		s.few[s.nFew] = stateVar{name, value}
		s.nFew++
	default:
		s.vars = make(map[string]any, 2*len(s.few))
		for _, v := range s.few[:s.nFew] {
			s.vars[v.name] = v.value
		}
		s.few, s.nFew = [len(s.few)]stateVar{}, 0
		s.vars[name] = value
	}
}

// Exists reports whether the user variable name is set.
func (s *State) Exists(name string) bool {
	if s.vars != nil {
		_, ok := s.vars[name]
		return ok
	}
	return s.findFew(name) >= 0
}

// Unset removes the user variable name.
func (s *State) Unset(name string) {
	if s.vars != nil {
		delete(s.vars, name)
		return
	}
	if i := s.findFew(name); i >= 0 {
		last := s.nFew - 1
		s.few[i], s.few[last] = s.few[last], stateVar{}
		s.nFew = last
	}
}

// findFew returns the index of the variable name in few, or -1.
func (s *State) findFew(name string) int {
	for i := range s.nFew {
		if s.few[i].name == name {
			return i
		}
	}
	return -1
}

// eachVar calls f with each user variable, in no particular order.
func (s *State) eachVar(f func(name string, value any)) {
	for _, v := range s.few[:s.nFew] {
		f(v.name, v.value)
	}
	for k, v := range s.vars {
		f(k, v)
	}
}

// copyVars gives s a copy of the user variables of model, in place of its own.
func (s *State) copyVars(model *State) {
	s.few, s.nFew, s.vars = model.few, model.nFew, maps.Clone(model.vars)
}

// names returns the user variable names in sorted order.
func (s *State) names() []string {
	names := make([]string, 0, s.nFew+len(s.vars))
	s.eachVar(func(name string, _ any) { names = append(names, name) })
	sort.Strings(names)
	return names
}

// fillMissing copies the user variables of model that s does not have.
func (s *State) fillMissing(model *State) {
	model.eachVar(func(name string, value any) {
		if !s.Exists(name) {
			s.Set(name, value)
		}
	})
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
