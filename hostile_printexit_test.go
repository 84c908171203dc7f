package asyncsteps_test

import (
	"runtime"
	"testing"
)

// exitingValue is a panic value whose String method calls runtime.Goexit:
// printing it, as the engine does for the info of the InternalError of a
// panic, would end the goroutine that prints it, in the middle of the
// engine's recovery on a loop's goroutine.
type exitingValue struct{}

func (exitingValue) String() string {
	runtime.Goexit()
	return "never"
}

// exitingPanickingValue is an exitingValue whose String method also has a
// deferred call that panics as the Goexit runs it; fmt recovers that
// panic, and the Goexit goes on.
type exitingPanickingValue struct{}

func (exitingPanickingValue) String() string {
	defer func() { panic("deferred") }()
	runtime.Goexit()
	return "never"
}

// A callback that panics with a value that calls runtime.Goexit when
// printed fails its step like any panic, the value named by its type: the
// flow does not hang, and the loop goes on serving. One child process per
// tool runs every callback kind.
func TestHostilePanicValueThatExitsWhenPrinted(t *testing.T) {
	exiting := []misdeed{
		{"String calls Goexit", func() { panic(exitingValue{}) },
			"a asyncsteps_test.exitingValue that calls runtime.Goexit when printed"},
		{"String calls Goexit and its defer panics", func() { panic(exitingPanickingValue{}) },
			"a asyncsteps_test.exitingPanickingValue that calls runtime.Goexit when printed"},
	}
	for _, tool := range hostileTools {
		if tool.name != "Loop" && tool.name != "TestTool" {
			continue // the others are Loops too
		}
		t.Run(tool.name, func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				for _, m := range exiting {
					for _, kind := range callbackKinds {
						t.Run(m.name+"/"+kind.name, func(t *testing.T) { hostileCallback(t, tool, m, kind) })
					}
				}
			})
		})
	}
}
