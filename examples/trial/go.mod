module github.com/asyncsteps/asyncsteps/examples/trial

go 1.25

require (
	github.com/asyncsteps/asyncsteps v0.0.0
	golang.org/x/sync v0.20.0
)

replace github.com/asyncsteps/asyncsteps => ../..
