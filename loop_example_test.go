package asyncsteps_test

import (
	"fmt"

	"github.com/asyncsteps/asyncsteps"
)

// Done tells a goroutine that does not call Close when the loop has stopped:
// from then on no callback of the loop runs, so what the dropped ones would
// have cleaned up is safe to clean up there.
func ExampleLoop_Done() {
	loop := asyncsteps.NewLoop()
	stopped := make(chan struct{})
	go func() {
		<-loop.Done()
		fmt.Println("the loop has stopped")
		close(stopped)
	}()
	loop.Immediate(func() {
		fmt.Println("last callback")
		loop.Close() // the loop stops once this callback returns
	})
	<-stopped
	// Output:
	// last callback
	// the loop has stopped
}
