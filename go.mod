module github.com/asyncsteps/asyncsteps

go 1.25
