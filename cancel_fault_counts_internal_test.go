package asyncsteps

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Each fault of a cancel handler is told once: seen by an error handler,
// or logged, never both nor twice. Two nested levels an error unwinds
// through, whose cancel handlers fault (a panic or a Goexit each), over
// where a cancel is requested (never, before the error, in the inner or
// the outer handler), a Close of the loop in the outer handler or not,
// and a StepError hook that exits as it is told of the inner fault or
// not.
func TestNestedCancelFaultsAreEachToldOnce(t *testing.T) {
	kinds := []string{"panic", "goexit"}
	cancels := []string{"never", "before", "inner", "outer"}
	for _, ik := range kinds {
		for _, ok := range kinds {
			for _, cw := range cancels {
				for _, closeIn := range []bool{false, true} {
					for _, hookExit := range []bool{false, true} {
						name := fmt.Sprintf("%s-%s-%s-close%v-hook%v", ik, ok, cw, closeIn, hookExit)
						t.Run(name, func(t *testing.T) {
							log := captureLog(t)
							l := NewLoop()
							defer l.Close()
							var r *Root
							if hookExit {
								l.SetHooks(&Hooks{StepError: func(_ context.Context, err *Error) {
									if err.Info == "inner" {
										runtime.Goexit()
									}
								}})
							}
							r = New(WithTool(l))
							fault := func(k, id string) {
								if k == "goexit" {
									runtime.Goexit()
								}
								panic(id)
							}
							var seen []string
							r.Add(func(as AsyncSteps, _ ...any) {
								as.Add(func(as AsyncSteps, _ ...any) {
									as.SetCancel(func(AsyncSteps) {
										if cw == "outer" {
											r.Cancel()
										}
										if closeIn {
											l.Close()
										}
										fault(ok, "outer")
									})
									as.Add(func(as AsyncSteps, _ ...any) {
										as.SetCancel(func(AsyncSteps) {
											if cw == "inner" {
												r.Cancel()
											}
											fault(ik, "inner")
										})
										if cw == "before" {
											r.Cancel()
										}
										as.Error("E")
									})
								})
							}, func(as AsyncSteps, code string) {
								seen = append(seen, as.State().ErrorInfo)
								as.Success()
							})
							<-r.Promise()
							l.Close()
							<-l.Done()
							out := log.String()
							count := func(s string) int { return strings.Count(out, s) }
							pi, po, g := count("panic=inner"), count("panic=outer"), count("runtime.Goexit in cancel handler")
							for _, s := range seen {
								switch {
								case s == "inner":
									pi++
								case s == "outer":
									po++
								case strings.Contains(s, "Goexit"):
									g++
								}
							}
							wantG := 0
							wantPi, wantPo := 0, 0
							if ik == "goexit" {
								wantG++
							} else {
								wantPi = 1
							}
							if ok == "goexit" {
								wantG++
							} else {
								wantPo = 1
							}
							if pi != wantPi || po != wantPo || g != wantG {
								t.Errorf("seen %q, logged:\n%s\ntold: inner %d outer %d goexit %d, want %d %d %d", seen, out, pi, po, g, wantPi, wantPo, wantG)
							}
						})
					}
				}
			}
		}
	}
}

// As TestNestedCancelFaultsAreEachToldOnce, for a failed Parallel branch
// whose cancel handler faults, a sibling's cancel handler that faults as
// the Parallel cancels it (closing the loop first or not), and a
// faulting cancel handler around the Parallel, which a Close leaves
// unrun when the sibling's Goexit left the rest to the next goroutine.
func TestBranchCancelFaultsAreEachToldOnce(t *testing.T) {
	kinds := []string{"panic", "goexit"}
	for _, ik := range kinds {
		for _, sk := range kinds {
			for _, cw := range []string{"never", "before", "branch", "sibling"} {
				for _, closeIn := range []bool{false, true} {
					for _, outerCancel := range []bool{false, true} {
						name := fmt.Sprintf("%s-%s-%s-close%v-outer%v", ik, sk, cw, closeIn, outerCancel)
						t.Run(name, func(t *testing.T) {
							log := captureLog(t)
							l := NewLoop()
							defer l.Close()
							r := New(WithTool(l))
							fault := func(k, id string) {
								if k == "goexit" {
									runtime.Goexit()
								}
								panic(id)
							}
							var seen []string
							r.Add(func(as AsyncSteps, _ ...any) {
								as.Add(func(as AsyncSteps, _ ...any) {
									if outerCancel {
										as.SetCancel(func(AsyncSteps) { panic("outer") })
									}
									p := as.Parallel()
									p.Add(func(as AsyncSteps, _ ...any) {
										as.SetCancel(func(AsyncSteps) {
											if cw == "sibling" {
												r.Cancel()
											}
											if closeIn {
												l.Close()
											}
											fault(sk, "sibling")
										})
									})
									p.Add(func(as AsyncSteps, _ ...any) {
										as.SetCancel(func(AsyncSteps) {
											if cw == "branch" {
												r.Cancel()
											}
											fault(ik, "inner")
										})
										if cw == "before" {
											r.Cancel()
										}
										as.Error("E")
									})
								})
							}, func(as AsyncSteps, code string) {
								seen = append(seen, as.State().ErrorInfo)
								as.Success()
							})
							<-r.Promise()
							l.Close()
							<-l.Done()
							out := log.String()
							count := func(s string) int { return strings.Count(out, s) }
							pi, ps, po, g := count("panic=inner"), count("panic=sibling"), count("panic=outer"), count("runtime.Goexit in cancel handler")
							for _, s := range seen {
								switch {
								case s == "inner":
									pi++
								case s == "sibling":
									ps++
								case s == "outer":
									po++
								case strings.Contains(s, "Goexit"):
									g++
								}
							}
							wantG, wantPi, wantPs := 0, 0, 0
							if ik == "goexit" {
								wantG++
							} else {
								wantPi = 1
							}
							if sk == "goexit" {
								wantG++
							} else {
								wantPs = 1
							}
							wantPo := 0
							if outerCancel && !(closeIn && sk == "goexit") {
								wantPo = 1
							}
							if pi != wantPi || ps != wantPs || po != wantPo || g != wantG {
								t.Errorf("seen %q, logged:\n%s\ntold: inner %d sibling %d outer %d goexit %d, want %d %d %d %d", seen, out, pi, ps, po, g, wantPi, wantPs, wantPo, wantG)
							}
						})
					}
				}
			}
		}
	}
}
