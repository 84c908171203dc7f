// Package printsafe prints values that user code gave as panics or errors,
// whose String or Error methods may misbehave, without letting them crash
// the process or end the goroutine that prints them.
package printsafe

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
)

// Sprint prints v like fmt.Sprint, or, when printing v panics (a String
// or Error method that panics with a value that panics when printed in
// turn) or calls runtime.Goexit, names v's type instead: printing a user's
// value must neither crash the process nor end the goroutine that prints
// it, which is often a loop's, in the middle of recovering a callback's
// panic (a flow left so would hang). A value whose printing may run a
// method of the user's is printed on a goroutine of its own, where a
// Goexit ends that goroutine only; panics are rare enough to pay for it.
func Sprint(v any) string {
	if s, ok := plainSprint(v); ok {
		return s
	}
	printed := make(chan string, 1)
	go func() {
		returned := false
		defer func() {
			if !returned {
				printed <- fmt.Sprintf("a %T that calls runtime.Goexit when printed", v) // %T reads no method
			}
		}()
		printed <- recoveredSprint(v)
		returned = true
	}()
	return <-printed
}

// recoveredSprint prints v like fmt.Sprint, or names v's type when that
// panics.
func recoveredSprint(v any) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("a %T that panics when printed", v) // %T reads no method
		}
	}()
	return fmt.Sprint(v)
}

// plainSprint prints v at once if printing it runs no method of the
// user's: a string, the runtime's own errors (a nil dereference, an index
// out of range) and those of errors.New, the usual panic values.
func plainSprint(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case runtime.Error:
		if t := reflect.TypeOf(v); t.PkgPath() == "runtime" || t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "runtime" {
			return v.Error(), true
		}
	case error:
		if reflect.TypeOf(v) == errorsNewType {
			return v.Error(), true
		}
	}
	return "", false
}

// errorsNewType is the type of the errors that errors.New makes.
var errorsNewType = reflect.TypeOf(errors.New(""))
